package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// option is one command-line option as Apache commons-cli declares it: the
// yarn commands' usage text and parsing both come from these declarations.
type option struct {
	name    string
	argName string
	desc    string
	hasArg  bool
	// multi options take every following non-option token, split on sep
	// (commons-cli's Option.UNLIMITED_VALUES with a value separator).
	multi bool
	sep   string
}

// parsed is the result of parsing arguments against a set of options, as
// commons-cli's CommandLine.
type parsed struct {
	values map[string][]string
	rest   []string
}

func (p *parsed) has(name string) bool { _, ok := p.values[name]; return ok }

func (p *parsed) value(name string) string {
	if v := p.values[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// errMissingArgument is commons-cli's MissingArgumentException, which the yarn
// commands catch to print "Missing argument for options".
type errMissingArgument struct{ opt string }

func (e errMissingArgument) Error() string { return "Missing argument for option: " + e.opt }

// errUnrecognized is commons-cli's UnrecognizedOptionException, which the yarn
// commands let escape to the JVM.
type errUnrecognized struct{ opt string }

func (e errUnrecognized) Error() string { return "Unrecognized option: " + e.opt }

// parseArgs parses args as commons-cli's GnuParser does for the options yarn
// declares: "-name" tokens select options (matched exactly, as the yarn
// commands use short names only), an option with an argument takes the next
// token, a multi-valued option takes tokens up to the next option, and other
// tokens are left over.
func parseArgs(opts []option, args []string) (*parsed, error) {
	byName := map[string]option{}
	for _, o := range opts {
		byName[o.name] = o
	}
	p := &parsed{values: map[string][]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			p.rest = append(p.rest, a)
			continue
		}
		if a == "--" {
			p.rest = append(p.rest, args[i+1:]...)
			break
		}
		name := strings.TrimLeft(a, "-")
		o, ok := byName[name]
		if !ok {
			return nil, errUnrecognized{opt: a}
		}
		if !o.hasArg {
			p.values[name] = append(p.values[name], []string{}...)
			continue
		}
		var vals []string
		for i+1 < len(args) && !(strings.HasPrefix(args[i+1], "-") && len(args[i+1]) > 1) {
			i++
			if o.sep != "" {
				vals = append(vals, strings.Split(args[i], o.sep)...)
			} else {
				vals = append(vals, args[i])
			}
			if !o.multi {
				break
			}
		}
		if len(vals) == 0 {
			return nil, errMissingArgument{opt: name}
		}
		p.values[name] = append(p.values[name], vals...)
	}
	return p, nil
}

// hasOtherThan reports whether any option outside keep was given, as
// ApplicationCLI.hasAnyOtherCLIOptions.
func (p *parsed) hasOtherThan(keep ...string) bool {
	for name := range p.values {
		found := false
		for _, k := range keep {
			if k == name {
				found = true
			}
		}
		if !found {
			return true
		}
	}
	return false
}

// Layout of commons-cli's HelpFormatter defaults.
const (
	helpWidth   = 74
	helpLeftPad = 1
	helpDescPad = 3
)

// printHelp writes what HelpFormatter.printHelp(title, options) writes:
// "usage: title", then the options sorted case-insensitively by name with
// their descriptions wrapped at 74 columns.
func printHelp(w io.Writer, title string, opts []option) {
	var b strings.Builder
	b.WriteString("usage: " + title + "\n")
	sorted := append([]option(nil), opts...)
	sort.Slice(sorted, func(i, j int) bool {
		return strings.ToLower(sorted[i].name) < strings.ToLower(sorted[j].name)
	})
	heads := make([]string, len(sorted))
	maxLen := 0
	for i, o := range sorted {
		h := strings.Repeat(" ", helpLeftPad) + "-" + o.name
		if o.hasArg {
			h += " <" + o.argName + ">"
		}
		heads[i] = h
		maxLen = max(maxLen, len(h))
	}
	for i, o := range sorted {
		line := heads[i] + strings.Repeat(" ", maxLen-len(heads[i])) + strings.Repeat(" ", helpDescPad) + o.desc
		renderWrapped(&b, line, maxLen+helpDescPad)
		b.WriteString("\n")
	}
	fmt.Fprint(w, b.String())
}

// renderWrapped is HelpFormatter.renderWrappedText: it breaks at the last
// space before the width, or hard at the width when a word is too long, and
// indents continuation lines to nextTab.
func renderWrapped(b *strings.Builder, text string, nextTab int) {
	pos := wrapPos(text, helpWidth)
	if pos == -1 {
		b.WriteString(strings.TrimRight(text, " "))
		return
	}
	b.WriteString(strings.TrimRight(text[:pos], " ") + "\n")
	pad := strings.Repeat(" ", nextTab)
	for {
		text = pad + strings.TrimLeft(text[pos:], " ")
		pos = wrapPos(text, helpWidth)
		if pos == -1 {
			b.WriteString(text)
			return
		}
		if len(text) > helpWidth && pos == nextTab-1 {
			pos = helpWidth
		}
		b.WriteString(strings.TrimRight(text[:pos], " ") + "\n")
	}
}

// wrapPos is HelpFormatter.findWrapPos from position 0.
func wrapPos(text string, width int) int {
	if width >= len(text) {
		return -1
	}
	pos := width
	for ; pos >= 0; pos-- {
		if c := text[pos]; c == ' ' || c == '\n' || c == '\r' {
			break
		}
	}
	if pos > 0 {
		return pos
	}
	return width
}
