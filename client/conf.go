package client

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/token"
)

// Configuration keys of the RM addresses and their default ports
// (yarn-default.xml).
const (
	KeyRMAddress         = hadoopconf.KeyRMAddress
	KeySchedulerAddress  = hadoopconf.KeyRMSchedulerAddress
	KeyRMHostname        = hadoopconf.KeyRMHostname
	DefaultRMPort        = 8032
	DefaultSchedulerPort = 8030
)

// Bounds of reading a configuration file: its size, and substitutions per
// value as Hadoop's MAX_SUBST.
const (
	maxConfBytes          = 4 << 20
	maxSubstitutionRounds = 20
)

// ConfAddress returns the host:port to dial for an RM address key (such as
// KeyRMAddress) from confDir/yarn-site.xml over yarn-default.xml's values,
// as a YarnConfiguration reads it (hadoopconf: ${name} and ${env.NAME}
// substitution, final properties): the key's value, else
// yarn.resourcemanager.hostname with the key's default port. A bare host
// takes defaultPort, and the wildcard host 0.0.0.0 becomes 127.0.0.1. ok
// reports whether the file named the address (through the key or the
// hostname); a missing confDir or file is not an error.
//
// With RM HA on (yarn.resourcemanager.ha.enabled and .rm-ids), addr lists
// each RM's address (key.<id>, else hostname.<id>), comma-separated in
// rm-ids order, which NewRMClient and NewAMRMClient fail over between, as
// ConfiguredRMFailoverProxyProvider does. Files other than yarn-site.xml
// are not looked at.
func ConfAddress(confDir, key string, defaultPort int) (addr string, ok bool, err error) {
	c := hadoopconf.New(hadoopconf.Options{})
	if confDir != "" {
		path := filepath.Join(confDir, "yarn-site.xml")
		if err := c.AddFile(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", false, fmt.Errorf("client: read %s: %w", path, err)
		}
	}
	ids, err := hadoopconf.RMHAIDs(c)
	if err != nil {
		return "", false, fmt.Errorf("client: %w", err)
	}
	if ids == nil {
		return confAddress(c, key, defaultPort)
	}
	addrs, ok, err := haAddresses(c, ids, key, defaultPort)
	return strings.Join(addrs, ","), ok, err
}

// ConfRMAddresses returns, with RM HA on, the RM ids of
// confDir/yarn-site.xml and each one's address for key, as ConfAddress
// reads them; both nil with HA off. `yarn rmadmin -getServiceState <id>`
// resolves ids so.
func ConfRMAddresses(confDir, key string, defaultPort int) (ids, addrs []string, err error) {
	c := hadoopconf.New(hadoopconf.Options{})
	if confDir != "" {
		path := filepath.Join(confDir, "yarn-site.xml")
		if err := c.AddFile(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("client: read %s: %w", path, err)
		}
	}
	if ids, err = hadoopconf.RMHAIDs(c); err != nil || ids == nil {
		return nil, nil, err
	}
	addrs, _, err = haAddresses(c, ids, key, defaultPort)
	return ids, addrs, err
}

func haAddresses(c *hadoopconf.Configuration, ids []string, key string, defaultPort int) (addrs []string, ok bool, err error) {
	addrs = make([]string, len(ids))
	for i, id := range ids {
		a, named, err := confAddress(hadoopconf.ForRM(c, id), key, defaultPort)
		if err != nil {
			return nil, false, err
		}
		addrs[i], ok = a, ok || named
	}
	return addrs, ok, nil
}

// confAddress is ConfAddress for one RM.
func confAddress(c *hadoopconf.Configuration, key string, defaultPort int) (addr string, ok bool, err error) {
	c = c.Clone()
	ok = c.Has(key) || c.Has(KeyRMHostname)
	for _, p := range hadoopconf.YarnDefaults() {
		c.SetDefault(p.Name, p.Value)
	}
	value, err := c.GetTrimmed(key, "${"+KeyRMHostname+"}:"+strconv.Itoa(defaultPort))
	if err != nil {
		return "", false, fmt.Errorf("client: %s: %w", key, err)
	}
	host, port, err := net.SplitHostPort(value)
	if err != nil {
		// NetUtils.createSocketAddr takes a bare host with the default port.
		host, port = value, strconv.Itoa(defaultPort)
	}
	if host == "" || host == "0.0.0.0" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), ok, nil
}

// ReadCredentialsFile reads a Hadoop credentials file, such as the one
// HADOOP_TOKEN_FILE_LOCATION names in a container.
func ReadCredentialsFile(path string) (*token.Credentials, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("client: read credentials: %w", err)
	}
	creds, err := token.ParseCredentials(b)
	if err != nil {
		return nil, fmt.Errorf("client: read credentials %s: %w", path, err)
	}
	return creds, nil
}

// AMRMToken returns the AMRMToken among an AM container's credentials (the
// RM puts it there under the alias "").
func AMRMToken(creds *token.Credentials) (token.Token, error) {
	for _, t := range creds.TokensOfKind(KindAMRMToken) {
		return t, nil
	}
	return token.Token{}, fmt.Errorf("client: no token of kind %s in the credentials", KindAMRMToken)
}

// LoginUser is the user a Hadoop client acts as under SIMPLE
// authentication, as UserGroupInformation finds it: $HADOOP_USER_NAME, else
// the operating system's login user ($USER, else the account of this
// process). getenv reads the environment.
func LoginUser(getenv func(string) string) string {
	for _, v := range []string{"HADOOP_USER_NAME", "USER"} {
		if u := getenv(v); u != "" {
			return u
		}
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "nobody"
}
