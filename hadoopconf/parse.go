package hadoopconf

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Errors a resource can fail with; each is wrapped with the resource's name
// and what was wrong.
var (
	// ErrTooLarge means a resource exceeded one of its Limits.
	ErrTooLarge = errors.New("configuration too large")
	// ErrMalformed means a resource is not a Hadoop configuration document.
	ErrMalformed = errors.New("malformed configuration")
)

// Limits bound what one resource may hold and how large a substituted value
// may grow. A zero field takes the DefaultLimits value.
type Limits struct {
	// MaxBytes is the largest resource, in bytes.
	MaxBytes int64
	// MaxProperties is the most properties a Configuration may hold, over
	// all its resources.
	MaxProperties int
	// MaxNameBytes is the longest property name.
	MaxNameBytes int
	// MaxValueBytes is the longest value, as written and after substitution.
	MaxValueBytes int
	// MaxDepth is the deepest element nesting.
	MaxDepth int
}

// DefaultLimits returns limits far above any real Hadoop configuration (a
// capacity-scheduler.xml for thousands of queues is a few megabytes) and far
// below what would hurt the ResourceManager.
func DefaultLimits() Limits {
	return Limits{
		MaxBytes:      16 << 20,
		MaxProperties: 200_000,
		MaxNameBytes:  4 << 10,
		MaxValueBytes: 1 << 20,
		MaxDepth:      32,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxProperties <= 0 {
		l.MaxProperties = d.MaxProperties
	}
	if l.MaxNameBytes <= 0 {
		l.MaxNameBytes = d.MaxNameBytes
	}
	if l.MaxValueBytes <= 0 {
		l.MaxValueBytes = d.MaxValueBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	return l
}

// item is one <property> as written: hasValue is false for a property whose
// value is missing or empty, which Hadoop does not set (but whose final mark
// it still records).
type item struct {
	name     string
	value    string
	hasValue bool
	final    bool
}

// countingReader fails once more than max bytes were read, so that a huge
// resource is refused without being buffered.
type countingReader struct {
	r   io.Reader
	n   int64
	max int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		return n, fmt.Errorf("more than %d bytes: %w", c.max, ErrTooLarge)
	}
	return n, err
}

// parse reads one resource. It follows Hadoop 3's Configuration.Parser: the
// document element must be <configuration>; <property> children of any
// <configuration> element are read, either from their name/value/final
// attributes or from child elements; <description>, <source>, <tag> and
// unknown elements are ignored.
func parse(r io.Reader, lim Limits) ([]item, error) {
	d := xml.NewDecoder(&countingReader{r: r, max: lim.MaxBytes})
	d.Strict = true
	d.CharsetReader = charsetReader

	var (
		items []item
		stack []string // open element names
		cur   *item    // the property being read
		field string   // "name", "value" or "final" while inside one
		text  strings.Builder
		root  bool
	)
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.Is(err, ErrTooLarge) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			if len(stack) == 0 {
				if root {
					return nil, fmt.Errorf("%w: more than one document element", ErrMalformed)
				}
				if name != "configuration" {
					return nil, fmt.Errorf("%w: top-level element not <configuration>", ErrMalformed)
				}
				root = true
			}
			if len(stack) >= lim.MaxDepth {
				return nil, fmt.Errorf("elements nested deeper than %d: %w", lim.MaxDepth, ErrTooLarge)
			}
			parent := ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			stack = append(stack, name)
			switch {
			case name == "include" && t.Name.Space == "http://www.w3.org/2001/XInclude",
				name == "include" && parent == "configuration":
				return nil, fmt.Errorf("%w: XInclude is not supported", ErrMalformed)
			case name == "property" && parent == "configuration":
				if len(items) >= lim.MaxProperties {
					return nil, fmt.Errorf("more than %d properties: %w", lim.MaxProperties, ErrTooLarge)
				}
				cur = &item{}
				for _, a := range t.Attr {
					switch a.Name.Local {
					case "name":
						cur.name = strings.TrimSpace(a.Value)
					case "value":
						cur.value, cur.hasValue = a.Value, a.Value != ""
					case "final":
						cur.final = a.Value == "true"
					}
				}
			case cur != nil && parent == "property" && (name == "name" || name == "value" || name == "final"):
				field = name
				text.Reset()
			}
		case xml.EndElement:
			name := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			switch {
			case field != "" && name == field:
				s := text.String()
				switch field {
				case "name":
					if s != "" {
						cur.name = strings.TrimSpace(s)
					}
				case "value":
					if s != "" {
						cur.value, cur.hasValue = s, true
					}
				case "final":
					cur.final = s == "true"
				}
				field = ""
			case cur != nil && name == "property" && len(stack) > 0 && stack[len(stack)-1] == "configuration":
				if err := checkItem(*cur, lim); err != nil {
					return nil, err
				}
				if cur.name != "" {
					items = append(items, *cur)
				}
				cur = nil
			}
		case xml.CharData:
			if field != "" {
				if text.Len()+len(t) > lim.MaxValueBytes {
					return nil, fmt.Errorf("a value longer than %d bytes: %w", lim.MaxValueBytes, ErrTooLarge)
				}
				text.Write(t)
			}
		}
	}
	if !root {
		return nil, fmt.Errorf("%w: no <configuration> element", ErrMalformed)
	}
	return items, nil
}

func checkItem(it item, lim Limits) error {
	if len(it.name) > lim.MaxNameBytes {
		return fmt.Errorf("a property name longer than %d bytes: %w", lim.MaxNameBytes, ErrTooLarge)
	}
	if len(it.value) > lim.MaxValueBytes {
		return fmt.Errorf("property %s: value longer than %d bytes: %w", it.name, lim.MaxValueBytes, ErrTooLarge)
	}
	return nil
}

// charsetReader accepts the encodings Hadoop files are written in besides
// UTF-8: US-ASCII (a subset) and ISO-8859-1 (each byte is its code point).
func charsetReader(charset string, input io.Reader) (io.Reader, error) {
	switch strings.ToLower(charset) {
	case "us-ascii", "ascii", "utf8":
		return input, nil
	case "iso-8859-1", "iso8859-1", "latin1", "latin-1":
		return &latin1Reader{r: input}, nil
	}
	return nil, fmt.Errorf("unsupported encoding %q", charset)
}

// latin1Reader converts ISO-8859-1 to UTF-8.
type latin1Reader struct {
	r   io.Reader
	buf []byte // encoded bytes not yet returned
}

func (l *latin1Reader) Read(p []byte) (int, error) {
	if len(l.buf) == 0 {
		raw := make([]byte, max(len(p)/2, 1))
		n, err := l.r.Read(raw)
		for _, b := range raw[:n] {
			l.buf = utf8.AppendRune(l.buf, rune(b))
		}
		if n == 0 {
			return 0, err
		}
	}
	n := copy(p, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}
