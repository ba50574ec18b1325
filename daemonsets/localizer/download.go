package localizer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// failure is a localization error in YARN's words: it fails the container
// (launch.Files.Failure) rather than the node's call.
type failure struct {
	msg string
	err error
}

func (f *failure) Error() string { return f.msg }
func (f *failure) Unwrap() error { return f.err }

func failf(err error, format string, args ...any) error {
	return &failure{msg: fmt.Sprintf(format, args...), err: err}
}

// isoTime is Times.formatISO8601 (yyyy-MM-dd'T'HH:mm:ss.SSSZ in the
// node's zone), the format of FSDownload's "changed" message.
func isoTime(ms int64) string {
	return time.UnixMilli(ms).Format("2006-01-02T15:04:05.000-0700")
}

// changedError is FSDownload.verifyAndCopy's message for a resource whose
// modification time is not the one the application recorded.
func changedError(u *url.URL, expected, actual int64, now time.Time) error {
	return failf(nil, "Resource %s changed on src filesystem - expected: \"%s\", was: \"%s\", current time: \"%s\"",
		u, isoTime(expected), isoTime(actual), isoTime(now.UnixMilli()))
}

// sizeChangedError is Knit's own check (YARN checks the timestamp only):
// a resource whose length is not the one recorded.
func sizeChangedError(u *url.URL, expected, actual int64) error {
	return failf(nil, "Resource %s changed on src filesystem - expected size: %d, was: %d", u, expected, actual)
}

// openError words a source's error as the container's diagnostic.
func openError(u *url.URL, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		// RawLocalFileSystem's and the HDFS client's FileNotFoundException.
		return failf(err, "File %s does not exist", u)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return failf(err, "Failed to download resource %s: %s", u, strings.TrimPrefix(err.Error(), "localizer: "))
}

// verify applies FSDownload's checks to an opened resource. An http(s)
// resource recorded with timestamp 0 is not checked: Hadoop's
// HttpFileSystem reports every file with modification time 0, so that is
// what applications record for them.
func verify(u *url.URL, o *Object, size, timestamp int64, public bool, now time.Time) error {
	httpZero := timestamp == 0 && (u.Scheme == "http" || u.Scheme == "https")
	if o.ModTime != timestamp && !httpZero {
		return changedError(u, timestamp, o.ModTime, now)
	}
	if size > 0 && o.Size >= 0 && o.Size != size {
		return sizeChangedError(u, size, o.Size)
	}
	if public && !o.Public {
		return failf(nil, "Resource %s is not publicly accessible and as such cannot be part of the public cache.", u)
	}
	return nil
}

// resource is one LocalResourceProto of a container, checked.
type resource struct {
	key       resourceKey
	url       *url.URL
	name      string // the localized file or folder: the URL's last element
	typ       yarnpb.LocalResourceTypeProto
	pattern   *regexp.Regexp // PATTERN's, anchored as Java's Matcher.matches
	size      int64
	timestamp int64
	public    bool
	user      string
}

// newResource reads p for a container of user in application app. Its
// errors are the application's fault.
func newResource(p *yarnpb.LocalResourceProto, user, app string) (*resource, error) {
	u, err := resourceURL(p.GetResource())
	if err != nil {
		return nil, failf(err, "Invalid resource: %s", strings.TrimPrefix(err.Error(), "localizer: "))
	}
	name := baseName(u)
	if name == "" || name == "." || name == ".." || name == metaName {
		return nil, failf(nil, "Invalid resource: %s names no file", u)
	}
	// An unset type or visibility is null in Java, which no NodeManager
	// handles; take the narrowest reading.
	typ := yarnpb.LocalResourceTypeProto_FILE
	if p.Type != nil {
		typ = p.GetType()
	}
	vis := yarnpb.LocalResourceVisibilityProto_APPLICATION
	if p.Visibility != nil {
		vis = p.GetVisibility()
	}
	r := &resource{
		url: u, name: name, typ: typ, size: p.GetSize(), timestamp: p.GetTimestamp(),
		public: vis == yarnpb.LocalResourceVisibilityProto_PUBLIC, user: user,
		key: resourceKey{
			URL: u.String(), Size: p.GetSize(), Timestamp: p.GetTimestamp(),
			Type: typ.String(), Visibility: vis.String(),
		},
	}
	if typ == yarnpb.LocalResourceTypeProto_PATTERN && p.Pattern != nil {
		r.key.Pattern = p.GetPattern()
		re, err := regexp.Compile(`^(?:` + p.GetPattern() + `)$`)
		if err != nil {
			return nil, failf(err, "Invalid pattern %q of resource %s: %v", p.GetPattern(), u, err)
		}
		r.pattern = re
	}
	switch vis {
	case yarnpb.LocalResourceVisibilityProto_PRIVATE:
		r.key.User = user
	case yarnpb.LocalResourceVisibilityProto_APPLICATION:
		r.key.User, r.key.App = user, app
	}
	return r, nil
}

// fetcher is FSDownload: it opens a resource, checks it, and copies or
// unpacks it into a folder.
type fetcher struct {
	sources map[string]Source
	limits  limits
	now     func() time.Time
	// slots bounds the downloads of the whole node
	// (yarn.nodemanager.localizer.fetch.thread-count).
	slots chan struct{}
}

// fetch writes r to dir/<name> and returns its size on disk.
func (f *fetcher) fetch(ctx context.Context, r *resource, dir string) (int64, error) {
	select {
	case f.slots <- struct{}{}:
		defer func() { <-f.slots }()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	src, ok := f.sources[r.url.Scheme]
	if !ok {
		// Hadoop's UnsupportedFileSystemException.
		return 0, failf(nil, "No FileSystem for scheme %q", r.url.Scheme)
	}
	o, err := src.Open(ctx, Request{URL: r.url, User: r.user, CheckPublic: r.public})
	if err != nil {
		return 0, openError(r.url, err)
	}
	defer o.Body.Close()
	if err := verify(r.url, o, r.size, r.timestamp, r.public, f.now()); err != nil {
		return 0, err
	}
	dst := filepath.Join(dir, r.name)
	err = f.unpack(ctx, r, o, dir, dst)
	var fl *failure
	switch {
	case err == nil:
		if err := setPermissions(dst); err != nil {
			return 0, err
		}
		return diskUsage(dst)
	case ctx.Err() != nil:
		return 0, ctx.Err()
	case errors.As(err, &fl):
		return 0, err
	case errors.Is(err, errBadArchive):
		return 0, failf(err, "Failed to unpack resource %s: %s", r.url, strings.TrimPrefix(err.Error(), errBadArchive.Error()+": "))
	default:
		return 0, err
	}
}

// unpack is FSDownload.unpack: ARCHIVE and PATTERN resources named like
// an archive are unpacked into a folder named as the resource (a PATTERN
// jar keeps only the entries matching the pattern, and the jar itself
// inside), anything else is copied as it is.
func (f *fetcher) unpack(ctx context.Context, r *resource, o *Object, dir, dst string) error {
	kind := notArchive
	if r.typ != yarnpb.LocalResourceTypeProto_FILE {
		kind = kindOf(r.name)
	}
	switch kind {
	case tarArchive, tarGzArchive:
		return untar(ctx, ctxReader{ctx: ctx, r: o.Body}, dst, kind == tarGzArchive, f.limits)
	case zipArchive:
		// archive/zip reads the central directory at the end: download
		// first.
		jar := filepath.Join(dir, ".download")
		if err := f.copy(ctx, r, o, jar); err != nil {
			return err
		}
		keep := (*regexp.Regexp)(nil)
		isJarPattern := r.typ == yarnpb.LocalResourceTypeProto_PATTERN && strings.HasSuffix(strings.ToLower(r.name), ".jar")
		if isJarPattern {
			keep = r.pattern
		}
		if err := unzip(ctx, jar, dst, keep, f.limits); err != nil {
			return err
		}
		if isJarPattern {
			// RunJar.unJarAndSave keeps the jar beside its entries.
			return renameFile(jar, filepath.Join(dst, r.name))
		}
		return removeFile(jar)
	default:
		return f.copy(ctx, r, o, dst)
	}
}

// copy writes the body to path, bounded by the size limit and checked
// against the size the source gave.
func (f *fetcher) copy(ctx context.Context, r *resource, o *Object, path string) error {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	in := &counter{r: readErr{ctxReader{ctx: ctx, r: o.Body}}}
	_, err = io.Copy(out, io.LimitReader(in, f.limits.maxBytes+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, errBadArchive):
		return failf(err, "Failed to download resource %s: %s", r.url, strings.TrimPrefix(err.Error(), errBadArchive.Error()+": "))
	case err != nil:
		return fmt.Errorf("localizer: write %s: %w", path, err)
	case in.n > f.limits.maxBytes:
		return failf(nil, "Failed to download resource %s: more than %d bytes", r.url, f.limits.maxBytes)
	case o.Size >= 0 && in.n != o.Size:
		return failf(nil, "Failed to download resource %s: read %d bytes of %d", r.url, in.n, o.Size)
	}
	return nil
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// ctxReader stops a copy once ctx ends, for sources whose reads do not
// watch it themselves.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func renameFile(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	return nil
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	return nil
}

// setPermissions is FSDownload.changePermissions with PUBLIC's modes for
// every visibility: folders 0755, files 0555 (readable and runnable, as a
// localized script must be, and not writable by containers). Everyone
// may read, because Knit does not give cache entries to the container's
// user: its pods may run as any uid.
func setPermissions(path string) error {
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return os.Chmod(p, 0o755)
		case d.Type().IsRegular():
			return os.Chmod(p, 0o555)
		}
		return nil // links keep theirs
	})
	if err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	return nil
}
