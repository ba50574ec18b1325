package localizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// defaultWebHDFSPort is the namenode's web port (dfs.namenode.http-address)
// for namenodes HDFSConfig.WebHDFS does not list.
const defaultWebHDFSPort = "9870"

// maxStatusBytes bounds a WebHDFS JSON answer.
const maxStatusBytes = 1 << 20

// HDFSConfig says how hdfs:// resources are read: through the namenodes'
// WebHDFS REST API, as the container's user (SIMPLE authentication,
// user.name). Not through Hadoop RPC: the Go HDFS RPC client registers the
// same hadoop.common protobuf messages as Knit's protocols, and one binary
// cannot hold both.
type HDFSConfig struct {
	// WebHDFS maps a namenode as hdfs:// URLs name it (host:port, host,
	// or an HA nameservice) to the WebHDFS base URLs of its namenodes
	// (e.g. http://nn1:9870), tried in order: a standby answers with
	// StandbyException and the next is asked.
	WebHDFS map[string][]string
	// DefaultFS is the namenode hdfs:///path means (fs.defaultFS's
	// authority: host:port or a nameservice).
	DefaultFS string
}

// webHDFS returns the WebHDFS base URLs for an hdfs URL's host and port.
func (c HDFSConfig) webHDFS(host, port string) ([]string, error) {
	authority := host
	if port != "" {
		authority = net.JoinHostPort(host, port)
	}
	if host == "" {
		if c.DefaultFS == "" {
			return nil, errors.New("localizer: hdfs URL names no namenode and no default filesystem is configured")
		}
		authority = c.DefaultFS
	}
	if bases, ok := c.WebHDFS[authority]; ok {
		return bases, nil
	}
	h, _, err := net.SplitHostPort(authority)
	if err != nil {
		h = strings.Trim(authority, "[]")
	}
	if bases, ok := c.WebHDFS[h]; ok {
		return bases, nil
	}
	return []string{"http://" + net.JoinHostPort(h, defaultWebHDFSPort)}, nil
}

// hdfsSource reads hdfs:// URLs through WebHDFS.
type hdfsSource struct {
	cfg    HDFSConfig
	client *http.Client
}

// fileStatus is WebHDFS's FileStatus, the fields read here.
type fileStatus struct {
	Length           int64  `json:"length"`
	ModificationTime int64  `json:"modificationTime"`
	Permission       string `json:"permission"`
	Type             string `json:"type"`
}

// remoteException is WebHDFS's error body.
type remoteException struct {
	RemoteException struct {
		Exception     string `json:"exception"`
		JavaClassName string `json:"javaClassName"`
		Message       string `json:"message"`
	} `json:"RemoteException"`
}

// errStandby marks a namenode that is not active: ask the next.
var errStandby = errors.New("namenode is in standby")

func (s hdfsSource) Open(ctx context.Context, r Request) (*Object, error) {
	bases, err := s.cfg.webHDFS(r.URL.Hostname(), r.URL.Port())
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, base := range bases {
		o, err := s.open(ctx, base, r)
		if err == nil {
			return o, nil
		}
		if !errors.Is(err, errStandby) && !isUnreachable(err) {
			return nil, err
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("localizer: no active namenode for %s: %w", r.URL, errors.Join(errs...))
}

func (s hdfsSource) open(ctx context.Context, base string, r Request) (*Object, error) {
	st, err := s.status(ctx, base, r.URL.Path, r.User)
	if err != nil {
		return nil, err
	}
	if st.Type == "DIRECTORY" {
		return nil, fmt.Errorf("localizer: %s is a folder; folders as local resources are not supported", r.URL)
	}
	o := &Object{Size: st.Length, ModTime: st.ModificationTime, Public: true}
	if r.CheckPublic {
		o.Public = isPublic(parsePerm(st.Permission), path.Dir(r.URL.Path), func(dir string) (fs.FileMode, error) {
			st, err := s.status(ctx, base, dir, r.User)
			if err != nil {
				return 0, err
			}
			return parsePerm(st.Permission), nil
		})
	}
	// OPEN redirects to a datanode; the client follows.
	resp, err := s.call(ctx, base, r.URL.Path, r.User, "OPEN")
	if err != nil {
		return nil, err
	}
	o.Body = resp.Body
	return o, nil
}

func (s hdfsSource) status(ctx context.Context, base, p, user string) (fileStatus, error) {
	resp, err := s.call(ctx, base, p, user, "GETFILESTATUS")
	if err != nil {
		return fileStatus{}, err
	}
	defer resp.Body.Close()
	var out struct {
		FileStatus fileStatus `json:"FileStatus"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxStatusBytes)).Decode(&out); err != nil {
		return fileStatus{}, fmt.Errorf("localizer: WebHDFS status of %s: %w", p, err)
	}
	return out.FileStatus, nil
}

// call runs one WebHDFS operation and returns its successful answer.
func (s hdfsSource) call(ctx context.Context, base, p, user, op string) (*http.Response, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("localizer: WebHDFS address %q: %w", base, err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/webhdfs/v1" + p
	u.RawQuery = url.Values{"op": {op}, "user.name": {user}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("localizer: %w", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("localizer: WebHDFS %s %s: %w", op, p, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	var re remoteException
	_ = json.NewDecoder(io.LimitReader(resp.Body, maxStatusBytes)).Decode(&re)
	ex := re.RemoteException
	switch {
	case ex.Exception == "StandbyException" || strings.HasSuffix(ex.JavaClassName, ".StandbyException"):
		return nil, fmt.Errorf("localizer: %s: %w", base, errStandby)
	case resp.StatusCode == http.StatusNotFound || ex.Exception == "FileNotFoundException":
		return nil, fmt.Errorf("localizer: %s: %w", ex.Message, fs.ErrNotExist)
	case ex.Message != "":
		return nil, fmt.Errorf("localizer: %s: %s", ex.JavaClassName, ex.Message)
	default:
		return nil, fmt.Errorf("localizer: WebHDFS %s %s: %s", op, p, resp.Status)
	}
}

// parsePerm reads WebHDFS's octal permission ("644", "1777").
func parsePerm(s string) fs.FileMode {
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0
	}
	return fs.FileMode(n).Perm()
}

// isUnreachable reports a namenode that could not be reached, so that the
// next one is tried.
func isUnreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
