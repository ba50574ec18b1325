package logs

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// LocalStore is a Store on the node's file system (a plain path or a
// file:// URI as remote-app-log-dir), as Hadoop's local FileSystem: it
// writes <path>.tmp and renames it into place.
type LocalStore struct{}

var (
	_ Store       = LocalStore{}
	_ StreamStore = LocalStore{}
)

// Create starts <path>.tmp; Commit syncs it and renames it into place.
func (LocalStore) Create(_ context.Context, path string) (Upload, error) {
	p, err := localPath(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p+tmpSuffix, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &localUpload{f: f, path: p}, nil
}

type localUpload struct {
	f    *os.File
	path string
}

func (u *localUpload) Write(p []byte) (int, error) { return u.f.Write(p) }

func (u *localUpload) Commit() error {
	err := u.f.Sync()
	if cerr := u.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(u.f.Name(), u.path)
	}
	if err != nil {
		os.Remove(u.f.Name())
		return fmt.Errorf("write %s: %w", u.path, err)
	}
	return nil
}

func (u *localUpload) Abort() {
	u.f.Close()
	os.Remove(u.f.Name())
}

// Put writes the file atomically.
func (LocalStore) Put(ctx context.Context, path string, r io.ReaderAt, size int64) error {
	p, err := localPath(path)
	if err != nil {
		return err
	}
	// The NodeManager makes the app folders 0770 and the file 0640; the
	// readers here are the CLI and web UIs, which run as other users.
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, &ctxReader{ctx: ctx, r: io.NewSectionReader(r, 0, size)})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// localPath accepts a path or a file:// URI.
func localPath(p string) (string, error) {
	if !strings.Contains(p, "://") {
		return p, nil
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "file" {
		return "", fmt.Errorf("%s is not a local path", p)
	}
	return u.Path, nil
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
