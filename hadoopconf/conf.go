package hadoopconf

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrSubstitution means a value's ${...} substitution reached Hadoop's limit
// of 20 substitutions or went past Limits.MaxValueBytes.
var ErrSubstitution = errors.New("variable substitution failed")

// maxSubst is Hadoop's Configuration.MAX_SUBST: one value may expand fewer
// than this many ${...} references, nested or not.
const maxSubst = 20

// Options configure a new Configuration.
type Options struct {
	// Limits bound every resource added; zero fields take DefaultLimits.
	Limits Limits
	// LookupEnv resolves ${env.NAME}; nil means os.LookupEnv.
	LookupEnv func(name string) (string, bool)
}

// Configuration is a set of Hadoop properties merged from resources in order,
// with Hadoop's final-property rules and variable substitution.
type Configuration struct {
	props     map[string]string
	sources   map[string]string
	final     map[string]bool
	warnings  []string
	limits    Limits
	lookupEnv func(string) (string, bool)
}

// New returns an empty Configuration.
func New(opts Options) *Configuration {
	env := opts.LookupEnv
	if env == nil {
		env = os.LookupEnv
	}
	return &Configuration{
		props:     map[string]string{},
		sources:   map[string]string{},
		final:     map[string]bool{},
		limits:    opts.Limits.withDefaults(),
		lookupEnv: env,
	}
}

// AddResource reads one configuration document and merges it over what the
// Configuration already holds. On error nothing is merged; the error names
// source and wraps ErrTooLarge or ErrMalformed.
func (c *Configuration) AddResource(r io.Reader, source string) error {
	items, err := parse(r, c.limits)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	added := 0
	for _, it := range items {
		if _, ok := c.props[it.name]; !ok && it.hasValue {
			added++
		}
	}
	if len(c.props)+added > c.limits.MaxProperties {
		return fmt.Errorf("%s: more than %d properties in all: %w", source, c.limits.MaxProperties, ErrTooLarge)
	}
	for _, it := range items {
		c.load(it, source)
	}
	return nil
}

// load applies one property as Hadoop's Configuration.loadProperty does: a
// value is set unless the name is already final, and a final mark sticks
// for every later resource (and later definitions in the same one).
func (c *Configuration) load(it item, source string) {
	if it.hasValue {
		if c.final[it.name] {
			if c.props[it.name] != it.value {
				c.warnings = append(c.warnings, fmt.Sprintf(
					"%s: an attempt to override final parameter: %s;  Ignoring.", source, it.name))
			}
		} else {
			c.props[it.name] = it.value
			c.sources[it.name] = source
		}
	}
	if it.final {
		c.final[it.name] = true
	}
}

// AddFile reads the file at path as AddResource does, refusing files larger
// than Limits.MaxBytes before reading them.
func (c *Configuration) AddFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read configuration: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > c.limits.MaxBytes {
		return fmt.Errorf("%s: %d bytes, more than %d: %w", path, st.Size(), c.limits.MaxBytes, ErrTooLarge)
	}
	return c.AddResource(f, path)
}

// AddDir reads the files named, in order, from a configuration folder
// (HADOOP_CONF_DIR), skipping those it lacks, as Hadoop skips a
// default resource it does not find; an empty dir adds nothing.
func (c *Configuration) AddDir(dir string, names ...string) error {
	if dir == "" {
		return nil
	}
	for _, name := range names {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := c.AddFile(path); err != nil {
			return err
		}
	}
	return nil
}

// Set sets a property as a program does with Configuration.set: final marks
// do not apply.
func (c *Configuration) Set(name, value string) {
	c.props[name] = value
	c.sources[name] = "programmatically"
}

// SetDefault sets a property only if no resource set it, as a value from a
// *-default.xml that loaded first would be.
func (c *Configuration) SetDefault(name, value string) {
	if _, ok := c.props[name]; !ok {
		c.Set(name, value)
		c.sources[name] = "default"
	}
}

// Clone returns an independent copy, for layering defaults or overrides
// without touching the original.
func (c *Configuration) Clone() *Configuration {
	return &Configuration{
		props:     maps.Clone(c.props),
		sources:   maps.Clone(c.sources),
		final:     maps.Clone(c.final),
		warnings:  slices.Clone(c.warnings),
		limits:    c.limits,
		lookupEnv: c.lookupEnv,
	}
}

// Raw returns a property's value as written, without substitution.
func (c *Configuration) Raw(name string) (string, bool) {
	v, ok := c.props[name]
	return v, ok
}

// Has reports whether the property is set.
func (c *Configuration) Has(name string) bool {
	_, ok := c.props[name]
	return ok
}

// IsFinal reports whether a resource marked the property final.
func (c *Configuration) IsFinal(name string) bool { return c.final[name] }

// Source names the resource that set the property's current value.
func (c *Configuration) Source(name string) string { return c.sources[name] }

// Names returns every property name, sorted.
func (c *Configuration) Names() []string {
	return slices.Sorted(maps.Keys(c.props))
}

// Warnings returns what merging ignored (overrides of final properties), in
// order. The caller owns the returned slice.
func (c *Configuration) Warnings() []string { return slices.Clone(c.warnings) }

// Get returns the property's value, or def when it is unset, with variables
// substituted (Hadoop substitutes the default too).
func (c *Configuration) Get(name, def string) (string, error) {
	v, ok := c.props[name]
	if !ok {
		v = def
	}
	return c.substitute(v)
}

// Lookup returns the substituted value and whether the property is set.
func (c *Configuration) Lookup(name string) (string, bool, error) {
	v, ok := c.props[name]
	if !ok {
		return "", false, nil
	}
	s, err := c.substitute(v)
	return s, true, err
}

// substitute is Hadoop's Configuration.substituteVars.
func (c *Configuration) substitute(expr string) (string, error) {
	eval := expr
	for range maxSubst {
		start, end := findSubVariable(eval)
		if start < 0 {
			return eval, nil
		}
		v := eval[start:end]
		val, ok := c.resolve(v)
		if !ok {
			return eval, nil // unbound: left as written
		}
		dollar, after := start-len("${"), end+len("}")
		if strings.Contains(val, eval[dollar:after]) {
			return expr, nil // self-referential: Hadoop returns the original
		}
		if len(eval)-(after-dollar)+len(val) > c.limits.MaxValueBytes {
			return "", fmt.Errorf("%w: %q expands past %d bytes", ErrSubstitution, truncate(expr), c.limits.MaxValueBytes)
		}
		eval = eval[:dollar] + val + eval[after:]
	}
	// As in Hadoop, the 20th substitution fails even if it was the last one.
	return "", fmt.Errorf("%w: Variable substitution depth too large: %d %s", ErrSubstitution, maxSubst, truncate(expr))
}

// resolve finds a variable's value: env.NAME (with :- and - defaults) from
// the environment, anything else from the properties. Java system
// properties, which Hadoop consults first, do not exist here.
func (c *Configuration) resolve(v string) (string, bool) {
	if env, ok := strings.CutPrefix(v, "env."); ok && env != "" {
		for i := 0; i < len(env); i++ {
			switch {
			case env[i] == ':' && i < len(env)-1 && env[i+1] == '-':
				if val, ok := c.lookupEnv(env[:i]); ok && val != "" {
					return val, true
				}
				return env[i+2:], true
			case env[i] == '-':
				if val, ok := c.lookupEnv(env[:i]); ok {
					return val, true
				}
				return env[i+1:], true
			}
		}
		return c.lookupEnv(env)
	}
	val, ok := c.props[v]
	return val, ok
}

// findSubVariable is Hadoop's Configuration.findSubVariable: the bounds of the
// first variable name in "${name}", where a name is non-empty and holds no
// '}', '$' or space; -1 when there is none.
func findSubVariable(eval string) (int, int) {
	matchStart := 1
	for {
		rel := strings.IndexByte(eval[min(matchStart, len(eval)):], '{')
		if rel < 0 {
			return -1, -1
		}
		leftBrace := min(matchStart, len(eval)) + rel
		if leftBrace <= 0 || leftBrace+len("{c") >= len(eval) {
			return -1, -1
		}
		if eval[leftBrace-1] != '$' {
			matchStart = leftBrace + 1
			continue
		}
		subStart := leftBrace + 1
		matched := 0
		restart := false
		for i := subStart; i < len(eval); i++ {
			ch := eval[i]
			if ch == '}' && matched > 0 {
				return subStart, subStart + matched
			}
			if ch == '}' || ch == ' ' || ch == '$' {
				matchStart = i + 1
				restart = true
				break
			}
			matched++
		}
		if !restart {
			return -1, -1
		}
	}
}

func truncate(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
