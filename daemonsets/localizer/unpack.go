package localizer

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// errBadArchive marks what is wrong with an archive's content, as opposed
// to the node's disk: it fails the container, not the node's call.
var errBadArchive = errors.New("bad archive")

// maxLinkTarget bounds a symbolic link's target read from a zip entry.
const maxLinkTarget = 4096

// limits bound what one archive may unpack to: archives come from the
// application and are not trusted.
type limits struct {
	maxBytes   int64
	maxEntries int
}

// archiveKind says how a resource is unpacked, by the suffix of its name,
// as FSDownload.unpack decides.
type archiveKind int

const (
	notArchive archiveKind = iota
	zipArchive
	tarArchive
	tarGzArchive
)

func kindOf(name string) archiveKind {
	n := strings.ToLower(name)
	switch {
	case strings.HasSuffix(n, ".jar"), strings.HasSuffix(n, ".zip"):
		return zipArchive
	case strings.HasSuffix(n, ".tar.gz"), strings.HasSuffix(n, ".tgz"):
		return tarGzArchive
	case strings.HasSuffix(n, ".tar"):
		return tarArchive
	}
	return notArchive
}

// unpacker writes an archive's entries under one folder, through an
// os.Root so that no entry, and no link an earlier entry made, leads out.
type unpacker struct {
	root    *os.Root
	lim     limits
	bytes   int64
	entries int
}

func newUnpacker(dst string, lim limits) (*unpacker, error) {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, fmt.Errorf("localizer: %w", err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return nil, fmt.Errorf("localizer: %w", err)
	}
	return &unpacker{root: root, lim: lim}, nil
}

func badArchive(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadArchive}, args...)...)
}

// entryName checks an entry's name and returns it cleaned. RunJar and
// FileUtil refuse entries that "would create file outside of" the folder.
func (u *unpacker) entryName(name string) (string, error) {
	u.entries++
	if u.entries > u.lim.maxEntries {
		return "", badArchive("more than %d entries", u.lim.maxEntries)
	}
	clean := path.Clean(strings.TrimSuffix(name, "/"))
	if !filepath.IsLocal(clean) || strings.HasPrefix(name, "/") {
		return "", badArchive("entry %q would create file outside of the archive's folder", name)
	}
	return clean, nil
}

// readErr marks errors reading the archive as bad archive: a truncated or
// corrupt stream is the resource's fault.
type readErr struct{ r io.Reader }

func (r readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF && !errors.Is(err, errBadArchive) {
		err = fmt.Errorf("%w: %w", errBadArchive, err)
	}
	return n, err
}

// writeFile writes one regular entry, counting its bytes against the
// limit as they are written, whatever the header said.
func (u *unpacker) writeFile(name string, mode fs.FileMode, r io.Reader) error {
	if name == "." {
		return badArchive("a file entry names the archive's folder itself")
	}
	if err := u.root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	// Replace, not write through, whatever an earlier entry left here.
	if err := u.root.RemoveAll(name); err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	f, err := u.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm()|0o600)
	if err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	left := u.lim.maxBytes - u.bytes
	n, err := io.Copy(f, io.LimitReader(readErr{r}, left+1))
	u.bytes += n
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("localizer: %w", cerr)
	}
	if err != nil {
		return err
	}
	if n > left {
		return badArchive("unpacks to more than %d bytes", u.lim.maxBytes)
	}
	return nil
}

// symlink makes a link entry; its target must stay inside the folder as
// written (checkLinks also checks where it leads once all are made).
func (u *unpacker) symlink(name, target string) error {
	if name == "." || target == "" || path.IsAbs(target) || !filepath.IsLocal(path.Join(path.Dir(name), target)) {
		return badArchive("link %q to %q leads outside of the archive's folder", name, target)
	}
	if err := u.root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	if err := u.root.RemoveAll(name); err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	if err := u.root.Symlink(target, name); err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	return nil
}

// unzip unpacks the zip or jar file src into dst, keeping only files
// whose names match keep in full (RunJar.unJar's pattern; nil keeps all).
func unzip(ctx context.Context, src, dst string, keep *regexp.Regexp, lim limits) error {
	zr, err := zip.OpenReader(src)
	if err != nil {
		return badArchive("%w", err)
	}
	defer zr.Close()
	return unzipFrom(ctx, &zr.Reader, dst, keep, lim)
}

// unzipFrom is unzip of an archive already open (the fuzz target's, in
// memory).
func unzipFrom(ctx context.Context, zr *zip.Reader, dst string, keep *regexp.Regexp, lim limits) error {
	u, err := newUnpacker(dst, lim)
	if err != nil {
		return err
	}
	defer u.root.Close()
	return u.finish(dst, u.unzip(ctx, zr, keep))
}

func (u *unpacker) unzip(ctx context.Context, zr *zip.Reader, keep *regexp.Regexp) error {
	for _, f := range zr.File {
		if err := ctx.Err(); err != nil {
			return err
		}
		name, err := u.entryName(f.Name)
		if err != nil {
			return err
		}
		mode := f.Mode()
		isDir := mode.IsDir() || strings.HasSuffix(f.Name, "/")
		if keep != nil && (isDir || !keep.MatchString(f.Name)) {
			continue
		}
		if isDir {
			if err := u.root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("localizer: %w", err)
			}
			continue
		}
		if err := u.zipEntry(f, name, mode); err != nil {
			return err
		}
	}
	return nil
}

func (u *unpacker) zipEntry(f *zip.File, name string, mode fs.FileMode) error {
	rc, err := f.Open()
	if err != nil {
		return badArchive("%w", err)
	}
	defer rc.Close()
	if mode&fs.ModeSymlink != 0 {
		b, err := io.ReadAll(io.LimitReader(readErr{rc}, maxLinkTarget+1))
		if err != nil {
			return err
		}
		if len(b) > maxLinkTarget {
			return badArchive("link %q has a target of more than %d bytes", f.Name, maxLinkTarget)
		}
		return u.symlink(name, string(b))
	}
	return u.writeFile(name, mode, rc)
}

// untar unpacks a tar stream, gzip-compressed if gz, into dst.
func untar(ctx context.Context, r io.Reader, dst string, gz bool, lim limits) error {
	if gz {
		zr, err := gzip.NewReader(readErr{r})
		if err != nil {
			return badArchive("%w", err)
		}
		defer zr.Close()
		r = zr
	}
	u, err := newUnpacker(dst, lim)
	if err != nil {
		return err
	}
	defer u.root.Close()
	return u.finish(dst, u.untar(ctx, tar.NewReader(readErr{r})))
}

func (u *unpacker) untar(ctx context.Context, tr *tar.Reader) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if !errors.Is(err, errBadArchive) {
				err = badArchive("%w", err)
			}
			return err
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := u.entryName(h.Name)
		if err != nil {
			return err
		}
		if err := u.tarEntry(tr, h, name); err != nil {
			return err
		}
	}
}

func (u *unpacker) tarEntry(tr *tar.Reader, h *tar.Header, name string) error {
	switch h.Typeflag {
	case tar.TypeDir:
		if err := u.root.MkdirAll(name, 0o755); err != nil {
			return fmt.Errorf("localizer: %w", err)
		}
		return nil
	case tar.TypeReg, tar.TypeRegA:
		return u.writeFile(name, h.FileInfo().Mode(), tr)
	case tar.TypeSymlink:
		return u.symlink(name, h.Linkname)
	case tar.TypeLink:
		target := path.Clean(h.Linkname)
		if name == "." || !filepath.IsLocal(target) || strings.HasPrefix(h.Linkname, "/") {
			return badArchive("hard link %q to %q leads outside of the archive's folder", h.Name, h.Linkname)
		}
		if err := u.root.MkdirAll(path.Dir(name), 0o755); err != nil {
			return fmt.Errorf("localizer: %w", err)
		}
		if err := u.root.RemoveAll(name); err != nil {
			return fmt.Errorf("localizer: %w", err)
		}
		if err := u.root.Link(target, name); err != nil {
			return badArchive("hard link %q to %q: %w", h.Name, h.Linkname, err)
		}
		return nil
	default:
		// Devices, fifos and the like have no place in a resource; an
		// unprivileged tar skips them too.
		return nil
	}
}

// finish checks the links of a folder unpacked with err, even a failed
// one: its caller removes the folder, but no link leading out should
// outlive the unpacking.
func (u *unpacker) finish(dst string, err error) error {
	if lerr := u.checkLinks(dst); err == nil {
		err = lerr
	}
	return err
}

// checkLinks resolves every symbolic link under dst once all entries are
// written: links that each look local can still chain out of the folder
// (a → ., then b → a/a/../..), and a hard link to a link moves its
// relative target. Links that lead out fail the archive; dangling ones are
// removed, since nothing inside would ever answer them.
func (u *unpacker) checkLinks(dst string) error {
	realDst, err := filepath.EvalSymlinks(dst)
	if err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	var out []string
	err = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("localizer: %w", err)
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		rel, _ := filepath.Rel(dst, p)
		resolved, err := filepath.EvalSymlinks(p)
		if err == nil {
			if r, err := filepath.Rel(realDst, resolved); err != nil || !filepath.IsLocal(r) && r != "." {
				out = append(out, rel)
			}
			return nil
		}
		if err := u.root.Remove(rel); err != nil {
			return fmt.Errorf("localizer: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(out) == 0 {
		return nil
	}
	// Removed even though the caller drops the folder: nothing that leads
	// out should outlive this call.
	for _, rel := range out {
		if err := u.root.Remove(rel); err != nil {
			return fmt.Errorf("localizer: %w", err)
		}
	}
	return badArchive("link %q leads outside of the archive's folder", out[0])
}
