package webshell

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/knitdev/knit/hadoopconf"
)

// Policy says whose application ACL opens a shell. A user on
// yarn.admin.acl (with yarn.acl.enable on) may open one under any policy.
type Policy string

// Policies, the values of KeyPolicy.
const (
	// PolicyModify lets in whoever may modify the application (MODIFY_APP,
	// as the RM decides it for a kill).
	PolicyModify Policy = "modify"
	// PolicyOwner lets in only the application's owner.
	PolicyOwner Policy = "owner"
	// PolicyView lets in whoever may view the application (VIEW_APP).
	PolicyView Policy = "view"
)

// Settings, as yarn-site.xml names them.
const (
	KeyEnabled         = "knit.webshell.enabled"
	KeyPolicy          = "knit.webshell.access"
	KeyMaxPerUser      = "knit.webshell.max-sessions-per-user"
	KeyMaxPerContainer = "knit.webshell.max-sessions-per-container"
	KeyIdleTimeout     = "knit.webshell.idle-timeout-ms"
	KeyRecheck         = "knit.webshell.recheck-interval-ms"
	KeyOrigins         = "knit.webshell.allowed-origins"
)

// Defaults of the settings.
const (
	DefaultMaxPerUser      = 8
	DefaultMaxPerContainer = 4
	DefaultIdleTimeout     = 30 * time.Minute
	DefaultRecheck         = 10 * time.Second
)

// Settings are the cluster owner's choices for the web shell.
type Settings struct {
	// Enabled serves the shell; when false the shell's paths answer 404.
	Enabled bool
	// Policy decides from the application's ACLs. Zero means PolicyModify.
	Policy Policy
	// MaxPerUser and MaxPerContainer bound the open sessions. Zero means
	// the default.
	MaxPerUser, MaxPerContainer int
	// IdleTimeout ends a session without a byte either way for that long;
	// Recheck is how often a session checks its container still runs and
	// its user still has access. Zero means the default.
	IdleTimeout, Recheck time.Duration
	// Origins are the origins ("http://host:port") a browser page may
	// open a shell from: the RM's web address. A handshake without an
	// Origin (not from a browser) is not checked.
	Origins []string
}

// LoadSettings reads the settings from the RM's configuration. rmWeb are
// the RM's web addresses as users reach it (host:port: as configured, as
// resolved); their origins are always allowed, with KeyOrigins' list
// (comma-separated) added.
func LoadSettings(c *hadoopconf.Configuration, rmWeb ...string) (Settings, error) {
	var s Settings
	var err error
	if s.Enabled, err = c.GetBool(KeyEnabled, true); err != nil {
		return s, err
	}
	p, err := c.GetTrimmed(KeyPolicy, string(PolicyModify))
	if err != nil {
		return s, err
	}
	s.Policy = Policy(strings.ToLower(p))
	if s.MaxPerUser, err = c.GetInt(KeyMaxPerUser, DefaultMaxPerUser); err != nil {
		return s, err
	}
	if s.MaxPerContainer, err = c.GetInt(KeyMaxPerContainer, DefaultMaxPerContainer); err != nil {
		return s, err
	}
	if s.IdleTimeout, err = c.GetDuration(KeyIdleTimeout, DefaultIdleTimeout, time.Millisecond); err != nil {
		return s, err
	}
	if s.Recheck, err = c.GetDuration(KeyRecheck, DefaultRecheck, time.Millisecond); err != nil {
		return s, err
	}
	origins, err := c.GetStrings(KeyOrigins, nil)
	if err != nil {
		return s, err
	}
	for _, a := range rmWeb {
		s.Origins = append(s.Origins, OriginsOf(a)...)
	}
	s.Origins = append(s.Origins, origins...)
	return s, s.validate()
}

// OriginsOf is the browser origins of the web address host:port: itself,
// and for a wildcard bind address the loopback names a local browser uses.
func OriginsOf(addr string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []string{"http://" + addr}
	}
	switch host {
	case "", "0.0.0.0", "::":
		return []string{"http://" + net.JoinHostPort("127.0.0.1", port), "http://" + net.JoinHostPort("localhost", port)}
	}
	return []string{"http://" + net.JoinHostPort(host, port)}
}

func (s *Settings) validate() error {
	switch s.Policy {
	case "":
		s.Policy = PolicyModify
	case PolicyModify, PolicyOwner, PolicyView:
	default:
		return fmt.Errorf("%s: %q is none of modify, owner, view", KeyPolicy, s.Policy)
	}
	for _, d := range []struct {
		key string
		v   *int
		def int
	}{{KeyMaxPerUser, &s.MaxPerUser, DefaultMaxPerUser}, {KeyMaxPerContainer, &s.MaxPerContainer, DefaultMaxPerContainer}} {
		if *d.v < 0 {
			return fmt.Errorf("%s: %d is negative", d.key, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	for _, d := range []struct {
		key string
		v   *time.Duration
		def time.Duration
	}{{KeyIdleTimeout, &s.IdleTimeout, DefaultIdleTimeout}, {KeyRecheck, &s.Recheck, DefaultRecheck}} {
		if *d.v < 0 {
			return fmt.Errorf("%s: %s is negative", d.key, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	for i, o := range s.Origins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("%s: %q is not an origin such as http://host:port", KeyOrigins, o)
		}
		s.Origins[i] = u.Scheme + "://" + strings.ToLower(u.Host)
	}
	slices.Sort(s.Origins)
	s.Origins = slices.Compact(s.Origins)
	return nil
}
