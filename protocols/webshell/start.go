package webshell

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on a Start.
const (
	// MaxArgs is the most words a command may have.
	MaxArgs = 256
	// MaxCommandBytes is the most bytes a command's words may add up to.
	MaxCommandBytes = 16 << 10
)

// Start is what the client asks for in the handshake's query.
type Start struct {
	// Command runs instead of the container's login shell when not empty.
	Command []string
	// TTY asks for a terminal; Size is its first size.
	TTY  bool
	Size Size
}

// Query keys of a Start.
const (
	keyCommand = "command"
	keyTTY     = "tty"
	keyCols    = "cols"
	keyRows    = "rows"
)

// PagePath is the page of a container's shell on the RM web port.
func PagePath(containerID string) string { return "/shell/" + url.PathEscape(containerID) }

// SocketPath is the WebSocket of a container's shell.
func SocketPath(containerID string) string { return PagePath(containerID) + "/ws" }

// Encode adds the Start to q.
func (s Start) Encode(q url.Values) {
	for _, w := range s.Command {
		q.Add(keyCommand, w)
	}
	if s.TTY {
		q.Set(keyTTY, "true")
		q.Set(keyCols, strconv.Itoa(int(s.Size.Cols)))
		q.Set(keyRows, strconv.Itoa(int(s.Size.Rows)))
	}
}

// ParseStart reads a Start from a handshake's query. A terminal without a
// size gets 80x24.
func ParseStart(q url.Values) (Start, error) {
	var s Start
	words := q[keyCommand]
	if len(words) > MaxArgs {
		return s, fmt.Errorf("webshell: a command of %d words is over the limit of %d", len(words), MaxArgs)
	}
	n := 0
	for _, w := range words {
		n += len(w)
		if !utf8.ValidString(w) || strings.ContainsRune(w, 0) {
			return s, fmt.Errorf("webshell: a command word is not UTF-8 text without NUL")
		}
	}
	if n > MaxCommandBytes {
		return s, fmt.Errorf("webshell: a command of %d bytes is over the limit of %d", n, MaxCommandBytes)
	}
	if len(words) > 0 {
		s.Command = append([]string(nil), words...)
	}
	switch v := q.Get(keyTTY); v {
	case "", "false":
	case "true":
		s.TTY = true
	default:
		return s, fmt.Errorf("webshell: tty=%q is neither true nor false", v)
	}
	if !s.TTY {
		return s, nil
	}
	s.Size = Size{Cols: 80, Rows: 24}
	for _, d := range []struct {
		key string
		to  *uint16
	}{{keyCols, &s.Size.Cols}, {keyRows, &s.Size.Rows}} {
		v := q.Get(d.key)
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			return s, fmt.Errorf("webshell: %s=%q is not a number of cells", d.key, v)
		}
		*d.to = uint16(n)
	}
	return s, s.Size.Validate()
}
