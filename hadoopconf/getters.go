package hadoopconf

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidValue means a property's value does not parse as the type asked
// for; Hadoop throws NumberFormatException for the same values.
var ErrInvalidValue = errors.New("invalid value")

// GetTrimmed returns the substituted value with surrounding whitespace
// removed, or def when the property is unset.
func (c *Configuration) GetTrimmed(name, def string) (string, error) {
	v, ok, err := c.Lookup(name)
	if err != nil || !ok {
		return def, err
	}
	return strings.TrimSpace(v), nil
}

// GetInt returns the property as a Java int (32 bits), decimal or 0x hex,
// or def when it is unset.
func (c *Configuration) GetInt(name string, def int) (int, error) {
	n, err := c.getInteger(name, int64(def), 32)
	return int(n), err
}

// GetInt64 returns the property as a Java long, decimal or 0x hex, or def
// when it is unset.
func (c *Configuration) GetInt64(name string, def int64) (int64, error) {
	return c.getInteger(name, def, 64)
}

func (c *Configuration) getInteger(name string, def int64, bits int) (int64, error) {
	v, ok, err := c.Lookup(name)
	if err != nil || !ok {
		return def, err
	}
	n, err := ParseJavaInt(strings.TrimSpace(v), bits)
	if err != nil {
		return def, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

// ParseJavaInt parses s as Integer.parseInt (bits 32) or Long.parseLong
// (bits 64) do after Hadoop's getHexDigits: an optional sign, then decimal
// digits or 0x/0X and hex digits.
func ParseJavaInt(s string, bits int) (int64, error) {
	digits, base := s, 10
	neg := strings.HasPrefix(digits, "-")
	if neg {
		digits = digits[1:]
	}
	if h, ok := strings.CutPrefix(digits, "0x"); ok {
		digits, base = h, 16
	} else if h, ok := strings.CutPrefix(digits, "0X"); ok {
		digits, base = h, 16
	} else {
		digits = s // Integer.parseInt takes the sign itself, '+' included
	}
	if base == 16 && neg {
		digits = "-" + digits
	}
	if strings.ContainsRune(digits, '_') {
		return 0, fmt.Errorf("%w: For input string: %q", ErrInvalidValue, s)
	}
	n, err := strconv.ParseInt(digits, base, bits)
	if err != nil {
		return 0, fmt.Errorf("%w: For input string: %q", ErrInvalidValue, s)
	}
	return n, nil
}

// GetFloat returns the property as a Java float, or def when it is unset.
// Capacities and percentages are floats in the CapacityScheduler, so they
// are read and computed in float32 to land on the same values.
func (c *Configuration) GetFloat(name string, def float32) (float32, error) {
	v, ok, err := c.Lookup(name)
	if err != nil || !ok {
		return def, err
	}
	f, err := ParseJavaFloat(strings.TrimSpace(v))
	if err != nil {
		return def, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

// ParseJavaFloat parses s as Float.parseFloat does: decimal or hex notation
// with an optional f/F/d/D suffix, "NaN" and "Infinity".
func ParseJavaFloat(s string) (float32, error) {
	bad := fmt.Errorf("%w: For input string: %q", ErrInvalidValue, s)
	body := strings.TrimLeft(s, "+-")
	switch body {
	case "NaN":
		return float32(math.NaN()), nil
	case "Infinity":
		if strings.HasPrefix(s, "-") {
			return float32(math.Inf(-1)), nil
		}
		return float32(math.Inf(1)), nil
	}
	if len(s)-len(body) > 1 || body == "" {
		return 0, bad
	}
	num := s
	if last := num[len(num)-1]; strings.IndexByte("fFdD", last) >= 0 && !strings.HasPrefix(body, "0x") && !strings.HasPrefix(body, "0X") {
		num = num[:len(num)-1]
	}
	// strconv knows Go's spellings too (inf, underscores); Java does not.
	if strings.ContainsAny(num, "_iInN") {
		return 0, bad
	}
	f, err := strconv.ParseFloat(num, 32)
	if err != nil {
		return 0, bad
	}
	return float32(f), nil
}

// GetBool returns true or false for a value equal to either, ignoring case and
// surrounding space, and def otherwise, as Hadoop's getBoolean does (it logs
// and falls back on anything else). Only a substitution failure is an error.
func (c *Configuration) GetBool(name string, def bool) (bool, error) {
	v, ok, err := c.Lookup(name)
	if err != nil || !ok {
		return def, err
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return def, nil
}

// durationUnit is one of Hadoop's ParsedTimeDuration suffixes.
type durationUnit struct {
	suffix string
	unit   time.Duration
}

// durationUnits lists the suffixes in the order Hadoop's unitFor tries them,
// so that "ms" is not read as "s".
func durationUnits() [7]durationUnit {
	return [7]durationUnit{
		{"ns", time.Nanosecond},
		{"us", time.Microsecond},
		{"ms", time.Millisecond},
		{"s", time.Second},
		{"m", time.Minute},
		{"h", time.Hour},
		{"d", 24 * time.Hour},
	}
}

// GetDuration returns the property as Hadoop's getTimeDuration reads it: an
// integer with an optional suffix ns, us, ms, s, m, h or d (any case); a bare
// number is in unit. def is returned when the property is unset.
func (c *Configuration) GetDuration(name string, def, unit time.Duration) (time.Duration, error) {
	v, ok, err := c.Lookup(name)
	if err != nil || !ok {
		return def, err
	}
	d, err := ParseDuration(v, unit)
	if err != nil {
		return def, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

// ParseDuration parses a Hadoop time duration; a bare number is in unit.
func ParseDuration(v string, unit time.Duration) (time.Duration, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	for _, u := range durationUnits() {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, unit = n, u.unit
			break
		}
	}
	n, err := ParseJavaInt(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: For input string: %q", ErrInvalidValue, v)
	}
	if n > int64(math.MaxInt64/unit) || n < int64(math.MinInt64/unit) {
		return 0, fmt.Errorf("%w: %q overflows a duration", ErrInvalidValue, v)
	}
	return time.Duration(n) * unit, nil
}

// GetStrings returns the value split at commas and newlines, each item
// trimmed and empty items dropped (Hadoop's getTrimmedStringCollection), or
// def when the property is unset. The caller owns the returned slice.
func (c *Configuration) GetStrings(name string, def []string) ([]string, error) {
	v, ok, err := c.Lookup(name)
	if err != nil || !ok {
		return def, err
	}
	return SplitTrimmed(v), nil
}

// SplitTrimmed splits s at commas and newlines, trims every item and drops the
// empty ones; it never returns nil.
func SplitTrimmed(s string) []string {
	out := []string{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
