package localizer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// Source opens the resources of the URL schemes it is registered for.
type Source interface {
	// Open starts reading the resource. An error for a missing resource
	// wraps fs.ErrNotExist.
	Open(ctx context.Context, r Request) (*Object, error)
}

// Request names one resource to open and on whose behalf.
type Request struct {
	URL *url.URL
	// User is the container's user; sources with users (hdfs) act as them.
	User string
	// CheckPublic asks the source to fill Object.Public, which costs a
	// look at every ancestor folder on sources with permissions.
	CheckPublic bool
}

// Object is an opened resource: its body and what its filesystem says of it.
type Object struct {
	Body io.ReadCloser
	// Size is the length in bytes, -1 if the source does not say.
	Size int64
	// ModTime is the modification time in ms since the epoch; 0 if the
	// source does not say, as Hadoop's HttpFileSystem reports it.
	ModTime int64
	// Public reports, when asked for, whether everyone may read the
	// resource (FSDownload.isPublic: the file readable by others, every
	// ancestor folder searchable by others). Sources without permissions
	// report true.
	Public bool
}

// resourceURL turns a URLProto into the URI YARN reads it as:
// new URI(scheme, userInfo, host, port, file, null, null). file is the
// decoded path; a port ≤ 0 or unset means none.
func resourceURL(p *yarnpb.URLProto) (*url.URL, error) {
	if p == nil {
		return nil, errors.New("localizer: local resource without a URL")
	}
	if p.GetScheme() == "" {
		return nil, fmt.Errorf("localizer: local resource URL %q without a scheme", p.GetFile())
	}
	u := &url.URL{Scheme: strings.ToLower(p.GetScheme()), Path: p.GetFile()}
	host := p.GetHost()
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]" // an IPv6 literal, as java.net.URI brackets it
	}
	if p.Port != nil && p.GetPort() > 0 {
		host += ":" + strconv.Itoa(int(p.GetPort()))
	}
	u.Host = host
	if ui := p.GetUserInfo(); ui != "" {
		if name, pass, ok := strings.Cut(ui, ":"); ok {
			u.User = url.UserPassword(name, pass)
		} else {
			u.User = url.User(ui)
		}
	}
	// java.net.URI prints a URI without authority as scheme:/path.
	u.OmitHost = u.Host == "" && u.User == nil
	return u, nil
}

// baseName is the last element of the resource's path, the name of the
// localized file or folder (Path.getName in FSDownload).
func baseName(u *url.URL) string {
	p := strings.TrimRight(u.Path, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	return p
}

// folderError refuses a resource that is a folder.
func folderError(u *url.URL) error {
	return fmt.Errorf("localizer: %s is a folder; folders as local resources are not supported", u)
}

// fileSource reads file:// URLs from the node's filesystem.
type fileSource struct{}

func (fileSource) Open(ctx context.Context, r Request) (*Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if h := r.URL.Hostname(); h != "" && h != "localhost" {
		return nil, fmt.Errorf("localizer: file URL %s names host %q, not this node", r.URL, h)
	}
	f, err := os.Open(filepath.FromSlash(r.URL.Path))
	if err != nil {
		return nil, fmt.Errorf("localizer: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("localizer: %w", err)
	}
	if st.IsDir() {
		_ = f.Close()
		return nil, folderError(r.URL)
	}
	o := &Object{Body: f, Size: st.Size(), ModTime: st.ModTime().UnixMilli(), Public: true}
	if r.CheckPublic {
		o.Public = isPublic(st.Mode(), filepath.Dir(f.Name()), func(dir string) (fs.FileMode, error) {
			st, err := os.Stat(dir)
			if err != nil {
				return 0, err
			}
			return st.Mode(), nil
		})
	}
	return o, nil
}

// isPublic is FSDownload.isPublic for a file: readable by others, and
// every folder from dir up to the root searchable by others.
func isPublic(mode fs.FileMode, dir string, stat func(string) (fs.FileMode, error)) bool {
	if mode.Perm()&0o004 == 0 {
		return false
	}
	for {
		m, err := stat(dir)
		if err != nil || m.Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

// httpSource reads http:// and https:// URLs with one GET each.
type httpSource struct {
	client *http.Client
}

func (s httpSource) Open(ctx context.Context, r Request) (*Object, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("localizer: %w", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("localizer: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		_ = resp.Body.Close()
		return nil, fmt.Errorf("localizer: GET %s: %s: %w", r.URL, resp.Status, fs.ErrNotExist)
	case resp.StatusCode != http.StatusOK:
		_ = resp.Body.Close()
		// java.net.HttpURLConnection's words, which YARN would report.
		return nil, fmt.Errorf("localizer: Server returned HTTP response code: %d for URL: %s", resp.StatusCode, r.URL)
	}
	o := &Object{Body: resp.Body, Size: resp.ContentLength, Public: true}
	if lm := resp.Header.Get("Last-Modified"); lm != "" {
		if t, err := http.ParseTime(lm); err == nil {
			o.ModTime = t.UnixMilli()
		}
	}
	return o, nil
}
