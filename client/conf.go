package client

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/knitdev/knit/protocols/token"
)

// Configuration keys of the RM addresses and their default ports
// (yarn-default.xml).
const (
	KeyRMAddress         = "yarn.resourcemanager.address"
	KeySchedulerAddress  = "yarn.resourcemanager.scheduler.address"
	KeyRMHostname        = "yarn.resourcemanager.hostname"
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
// KeyRMAddress) from confDir/yarn-site.xml, as a YarnConfiguration reads
// it: the key's value with ${name} and ${env.NAME} substituted, else
// yarn.resourcemanager.hostname with defaultPort, else the local host. The
// wildcard host 0.0.0.0 becomes 127.0.0.1. ok reports whether the file named
// the address (through the key or the hostname); a missing confDir or file
// is not an error.
//
// It reads only what an application needs; RM HA (rm-ids) and files other
// than yarn-site.xml are not looked at.
func ConfAddress(confDir, key string, defaultPort int) (addr string, ok bool, err error) {
	props := map[string]string{}
	if confDir != "" {
		path := filepath.Join(confDir, "yarn-site.xml")
		props, err = readSiteFile(path)
		if errors.Is(err, os.ErrNotExist) {
			props, err = map[string]string{}, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("client: read %s: %w", path, err)
		}
	}
	value, ok := props[key]
	if !ok {
		_, ok = props[KeyRMHostname]
		value = "${" + KeyRMHostname + "}:" + strconv.Itoa(defaultPort)
	}
	if _, set := props[KeyRMHostname]; !set {
		props[KeyRMHostname] = "0.0.0.0"
	}
	value = strings.TrimSpace(substitute(value, props))
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

// readSiteFile reads the properties of a Hadoop configuration file; a later
// definition replaces an earlier one.
func readSiteFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var doc struct {
		Properties []struct {
			Name  string `xml:"name"`
			Value string `xml:"value"`
		} `xml:"property"`
	}
	if err := xml.NewDecoder(io.LimitReader(f, maxConfBytes)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	props := map[string]string{}
	for _, p := range doc.Properties {
		if name := strings.TrimSpace(p.Name); name != "" && p.Value != "" {
			props[name] = p.Value
		}
	}
	return props, nil
}

// substitute expands ${name} from props and ${env.NAME} from the
// environment, as Configuration.substituteVars does for the simple cases;
// an unknown variable is left as written.
func substitute(v string, props map[string]string) string {
	for range maxSubstitutionRounds {
		start := strings.Index(v, "${")
		if start < 0 {
			return v
		}
		end := strings.Index(v[start:], "}")
		if end < 0 {
			return v
		}
		name := v[start+2 : start+end]
		var repl string
		var found bool
		if env, isEnv := strings.CutPrefix(name, "env."); isEnv {
			repl, found = os.LookupEnv(env)
		} else {
			repl, found = props[name]
		}
		if !found {
			return v
		}
		v = v[:start] + repl + v[start+end+1:]
	}
	return v
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
