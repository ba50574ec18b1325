package dshell

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// staged is what the client staged for one application's AM: the
// folder, the files as the AM's local resources, and the AM environment
// that locates the script.
type staged struct {
	dir       string
	resources []*yarnpb.StringLocalResourceMapProto
	env       []*yarnpb.StringStringMapProto
}

// stage writes the shell command and arguments of task, and copies the
// script at scriptPath (if any), into dir/appName/appID, as
// DistributedShell's client stages them under the filesystem's home
// folder: the command and arguments in Java's writeUTF form, each file
// only if it has something to say. The caller removes the folder once the
// application has ended.
func stage(dir, appName, appID string, task TaskSpec, scriptPath string) (*staged, error) {
	s := &staged{dir: filepath.Join(dir, appName, appID)}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("dshell client: staging folder: %w", err)
	}
	for _, f := range []struct{ key, text string }{
		{ShellCommandKey, task.ShellCommand},
		{ShellArgsKey, task.ShellArgs},
	} {
		if f.text == "" {
			continue
		}
		b, err := appendJavaUTF(nil, f.text)
		if err != nil {
			return s, fmt.Errorf("dshell client: %s: %w", f.key, err)
		}
		r, err := s.write(f.key, b)
		if err != nil {
			return s, err
		}
		s.resources = append(s.resources, &yarnpb.StringLocalResourceMapProto{Key: proto.String(f.key), Value: r})
	}
	if scriptPath != "" {
		b, err := os.ReadFile(scriptPath)
		if err != nil {
			return s, fmt.Errorf("dshell client: shell script: %w", err)
		}
		r, err := s.write(ShellScriptKey, b)
		if err != nil {
			return s, err
		}
		// The AM does not need the script itself; it hands it to each
		// container.
		loc := url.URL{Scheme: "file", Path: r.GetResource().GetFile()}
		s.env = []*yarnpb.StringStringMapProto{
			{Key: proto.String(EnvScriptLocation), Value: proto.String(loc.String())},
			{Key: proto.String(EnvScriptTimestamp), Value: proto.String(strconv.FormatInt(r.GetTimestamp(), 10))},
			{Key: proto.String(EnvScriptLen), Value: proto.String(strconv.FormatInt(r.GetSize(), 10))},
		}
	}
	return s, nil
}

// write writes one staged file and describes it as a local resource.
func (s *staged) write(name string, b []byte) (*yarnpb.LocalResourceProto, error) {
	path := filepath.Join(s.dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, fmt.Errorf("dshell client: stage %s: %w", name, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("dshell client: stage %s: %w", name, err)
	}
	return fileResource(path, fi.Size(), fi.ModTime().UnixMilli()), nil
}

// remove removes the application's staging folder, and the application
// name's folder above it once empty.
func (s *staged) remove() error {
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("dshell client: remove staged files: %w", err)
	}
	_ = os.Remove(filepath.Dir(s.dir)) // fails while other applications' folders are in it
	return nil
}

// readStaged reads what the client staged for the AM from the AM's
// working folder (dir, where the NodeManager links its local resources)
// and environment, into spec, as DistributedShell's ApplicationMaster.init
// does: the shellCommands and shellArgs files if they exist, the script
// from the DISTRIBUTEDSHELLSCRIPT* variables. A command or arguments given
// as flags (an AM started by hand) are kept.
func readStaged(dir fs.FS, getenv func(string) string, spec *TaskSpec) error {
	for _, f := range []struct {
		key string
		to  *string
	}{
		{ShellCommandKey, &spec.ShellCommand},
		{ShellArgsKey, &spec.ShellArgs},
	} {
		if *f.to != "" {
			continue
		}
		b, err := fs.ReadFile(dir, f.key)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("dshell am: %w", err)
		}
		if *f.to, err = readJavaUTF(b); err != nil {
			return fmt.Errorf("dshell am: %s: %w", f.key, err)
		}
	}
	loc := getenv(EnvScriptLocation)
	if loc == "" {
		return nil
	}
	u, err := url.Parse(loc)
	if err != nil {
		return fmt.Errorf("dshell am: %s: %w", EnvScriptLocation, err)
	}
	ts, terr := strconv.ParseInt(getenv(EnvScriptTimestamp), 10, 64)
	size, serr := strconv.ParseInt(getenv(EnvScriptLen), 10, 64)
	if terr != nil || serr != nil || ts <= 0 || size <= 0 {
		// ApplicationMaster.init's words.
		return errors.New("dshell am: Illegal values in env for shell script path")
	}
	spec.Script = &yarnpb.LocalResourceProto{
		Resource:   urlProto(u),
		Size:       proto.Int64(size),
		Timestamp:  proto.Int64(ts),
		Type:       yarnpb.LocalResourceTypeProto_FILE.Enum(),
		Visibility: yarnpb.LocalResourceVisibilityProto_APPLICATION.Enum(),
	}
	return nil
}

// urlProto is YARN's URL.fromURI.
func urlProto(u *url.URL) *yarnpb.URLProto {
	p := &yarnpb.URLProto{Scheme: proto.String(u.Scheme), File: proto.String(u.Path)}
	if h := u.Hostname(); h != "" {
		p.Host = proto.String(h)
	}
	if port, err := strconv.Atoi(u.Port()); err == nil {
		p.Port = proto.Int32(int32(port))
	}
	if u.User != nil {
		p.UserInfo = proto.String(u.User.String())
	}
	return p
}

// maxJavaUTF is the most bytes writeUTF can write after its length.
const maxJavaUTF = 1<<16 - 1

// appendJavaUTF appends s as Java's DataOutputStream.writeUTF writes it,
// the form DistributedShell's files are in: a 2-byte big-endian length,
// then modified UTF-8 (NUL as 0xC0 0x80, a character beyond the BMP as
// its two UTF-16 surrogates of 3 bytes each). Bytes of s that are not
// UTF-8 become U+FFFD, as when Java decodes its command line. Like
// writeUTF, it refuses text over 65535 bytes so encoded.
func appendJavaUTF(b []byte, s string) ([]byte, error) {
	var enc []byte
	for _, r := range s {
		switch {
		case r >= 0x01 && r <= 0x7f:
			enc = append(enc, byte(r))
		case r <= 0x7ff:
			enc = append(enc, 0xc0|byte(r>>6), 0x80|byte(r&0x3f))
		case r <= 0xffff:
			enc = appendJava3(enc, r)
		default:
			hi, lo := utf16.EncodeRune(r)
			enc = appendJava3(appendJava3(enc, hi), lo)
		}
	}
	if len(enc) > maxJavaUTF {
		return b, fmt.Errorf("%d bytes in Java's modified UTF-8, over writeUTF's %d", len(enc), maxJavaUTF)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(enc)))
	return append(b, enc...), nil
}

func appendJava3(b []byte, r rune) []byte {
	return append(b, 0xe0|byte(r>>12), 0x80|byte(r>>6&0x3f), 0x80|byte(r&0x3f))
}

// errBadJavaUTF is a file that DataInputStream.readUTF would refuse.
var errBadJavaUTF = errors.New("malformed Java modified UTF-8")

// readJavaUTF reads what appendJavaUTF writes, as DataInputStream.readUTF
// does: the length, then as many bytes of 1-, 2- and 3-byte sequences
// (UTF-16 code units; surrogate pairs become one character, a lone one
// U+FFFD). Bytes after them are ignored, as readUTF leaves them unread.
func readJavaUTF(b []byte) (string, error) {
	if len(b) < 2 {
		return "", fmt.Errorf("%w: %w", errBadJavaUTF, io.ErrUnexpectedEOF)
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if len(b) < n {
		return "", fmt.Errorf("%w: %d bytes of %d", errBadJavaUTF, len(b), n)
	}
	b = b[:n]
	units := make([]uint16, 0, n)
	for len(b) > 0 {
		c := b[0]
		switch {
		case c < 0x80:
			units = append(units, uint16(c))
			b = b[1:]
		case c&0xe0 == 0xc0 && len(b) >= 2 && b[1]&0xc0 == 0x80:
			units = append(units, uint16(c&0x1f)<<6|uint16(b[1]&0x3f))
			b = b[2:]
		case c&0xf0 == 0xe0 && len(b) >= 3 && b[1]&0xc0 == 0x80 && b[2]&0xc0 == 0x80:
			units = append(units, uint16(c&0x0f)<<12|uint16(b[1]&0x3f)<<6|uint16(b[2]&0x3f))
			b = b[3:]
		default:
			return "", fmt.Errorf("%w: byte %#x", errBadJavaUTF, c)
		}
	}
	runes := utf16.Decode(units)
	out := make([]byte, 0, len(runes))
	for _, r := range runes {
		out = utf8.AppendRune(out, r)
	}
	return string(out), nil
}
