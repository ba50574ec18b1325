package hadoopconf

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// ErrUnwritable means a property cannot be written so that Hadoop reads back
// the same name and value: an empty or untrimmed name, or a character XML
// 1.0 cannot carry.
var ErrUnwritable = errors.New("property cannot be written as Hadoop XML")

// Property is one property to write.
type Property struct {
	Name  string
	Value string
	// Final marks the property so that resources loaded after this one
	// cannot override it.
	Final bool
}

// Write writes props, in the order given, as a Hadoop configuration document
// that Hadoop's Configuration (and AddResource) reads back unchanged. Nothing
// is written if a property is unwritable.
func Write(w io.Writer, props []Property) error {
	for _, p := range props {
		if p.Name == "" || strings.TrimSpace(p.Name) != p.Name {
			return fmt.Errorf("%w: name %q", ErrUnwritable, p.Name)
		}
		if !xmlChars(p.Name) || !xmlChars(p.Value) {
			return fmt.Errorf("%w: %s holds a character XML cannot carry", ErrUnwritable, p.Name)
		}
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(xml.Header)
	bw.WriteString("<configuration>\n")
	for _, p := range props {
		bw.WriteString("  <property>\n    <name>")
		xml.EscapeText(bw, []byte(p.Name))
		bw.WriteString("</name>\n    <value>")
		xml.EscapeText(bw, []byte(p.Value))
		bw.WriteString("</value>\n")
		if p.Final {
			bw.WriteString("    <final>true</final>\n")
		}
		bw.WriteString("  </property>\n")
	}
	bw.WriteString("</configuration>\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write configuration: %w", err)
	}
	return nil
}

// WriteXML writes every property of c, sorted by name, with its raw
// (unsubstituted) value and its final mark.
func (c *Configuration) WriteXML(w io.Writer) error {
	props := make([]Property, 0, len(c.props))
	for _, name := range c.Names() {
		props = append(props, Property{Name: name, Value: c.props[name], Final: c.final[name]})
	}
	return Write(w, props)
}

// xmlChars reports whether every rune of s is valid UTF-8 and an XML 1.0
// Char, so that an escaped s parses back to itself.
func xmlChars(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return false
			}
		}
		ok := r == 0x09 || r == 0x0A || r == 0x0D ||
			(r >= 0x20 && r <= 0xD7FF) ||
			(r >= 0xE000 && r <= 0xFFFD) ||
			(r >= 0x10000 && r <= 0x10FFFF)
		if !ok {
			return false
		}
	}
	return true
}
