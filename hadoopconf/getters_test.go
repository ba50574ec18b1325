package hadoopconf

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSubstitutionFollowsHadoop(t *testing.T) {
	env := envOf(map[string]string{"HOME": "/home/knit", "EMPTY": ""})
	base := []string{
		"host", "rm.example.com",
		"port", "8032",
		"addr", "${host}:${port}",
		"chain", "${addr}/ws",
		"self", "x${self}",
	}
	tests := []struct {
		name, value, want string
	}{
		{"a property", "${host}", "rm.example.com"},
		{"nested through other properties", "http://${chain}", "http://rm.example.com:8032/ws"},
		{"the environment", "${env.HOME}/conf", "/home/knit/conf"},
		{"an unset variable stays as written", "${nope}/x", "${nope}/x"},
		{"an unset env variable stays as written", "${env.NOPE}", "${env.NOPE}"},
		{":- default for an unset env variable", "${env.NOPE:-/tmp}", "/tmp"},
		{":- default for an empty env variable", "${env.EMPTY:-/tmp}", "/tmp"},
		{":- ignored for a set env variable", "${env.HOME:-/tmp}", "/home/knit"},
		{"- default for an unset env variable", "${env.NOPE-/tmp}", "/tmp"},
		{"- keeps an empty env variable", "${env.EMPTY-/tmp}", ""},
		{"env. alone is a property name", "${env.}", "${env.}"},
		{"a name with a space is not a variable", "${a b}${host}", "${a b}rm.example.com"},
		{"an empty name is not a variable", "${}${host}", "${}rm.example.com"},
		{"a dollar before a variable stays", "$${host}", "$rm.example.com"},
		{"a lone brace is text", "{host}", "{host}"},
		// Hadoop returns the original expression when a value refers to
		// itself, rather than looping.
		{"a self-referencing value is returned unexpanded", "${self}", "${self}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fromXML(t, Options{LookupEnv: env}, props(append(slices.Clone(base), "k", tt.value)...))
			if got := mustGet(t, c, "k"); got != tt.want {
				t.Errorf("%q expands to %q, want %q", tt.value, got, tt.want)
			}
		})
	}
}

// Hadoop fails a value needing 20 substitutions, nested or side by side; 19
// are fine.
func TestSubstitutionDepthIsBoundedAsInHadoop(t *testing.T) {
	for _, n := range []int{19, 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			kv := []string{"v", "x"}
			kv = append(kv, "k", strings.Repeat("${v}", n))
			c := fromXML(t, Options{}, props(kv...))
			got, err := c.Get("k", "")
			if n < 20 {
				if err != nil || got != strings.Repeat("x", n) {
					t.Fatalf("Get = %q, %v", got, err)
				}
				return
			}
			if !errors.Is(err, ErrSubstitution) || !strings.Contains(err.Error(), "Variable substitution depth too large: 20") {
				t.Fatalf("Get = %q, %v; want the depth error", got, err)
			}
		})
	}
}

// Only direct self-reference is caught; a loop through two properties runs
// into the depth limit, as in Hadoop.
func TestSubstitutionLoopsEndAtTheDepthLimit(t *testing.T) {
	c := fromXML(t, Options{}, props("a", "${b}", "b", "${a}"))
	if _, err := c.Get("a", ""); !errors.Is(err, ErrSubstitution) {
		t.Fatalf("Get(a) = %v, want ErrSubstitution", err)
	}
}

// Repeated references would otherwise turn a few bytes of XML into far more
// memory than the file: expansion stops at MaxValueBytes.
func TestSubstitutionCannotExplode(t *testing.T) {
	big := strings.Repeat("a", 1000)
	c := fromXML(t, Options{Limits: Limits{MaxValueBytes: 8 << 10}}, props(
		"big", big,
		"eight", strings.Repeat("${big}", 8),
		"nineteen", strings.Repeat("${big}", 19),
	))
	if v, err := c.Get("eight", ""); err != nil || len(v) != 8000 {
		t.Fatalf("Get(eight) = %d bytes, %v", len(v), err)
	}
	_, err := c.Get("nineteen", "")
	if !errors.Is(err, ErrSubstitution) || !strings.Contains(err.Error(), "expands past 8192 bytes") {
		t.Fatalf("Get(nineteen) = %v, want the size error", err)
	}
}

func TestDefaultsAreSubstitutedToo(t *testing.T) {
	c := fromXML(t, Options{}, props("host", "rm"))
	if got, _ := c.Get("missing", "${host}:8032"); got != "rm:8032" {
		t.Errorf("Get with default = %q", got)
	}
}

func TestGetInt(t *testing.T) {
	tests := []struct {
		value   string
		want    int
		wantErr bool
	}{
		{"42", 42, false},
		{"  42\n", 42, false},
		{"+7", 7, false},
		{"-7", -7, false},
		{"0x1F", 31, false},
		{"0X1f", 31, false},
		{"-0x10", -16, false},
		{"2147483647", math.MaxInt32, false},
		{"2147483648", 0, true},
		{"1_000", 0, true},
		{"4.0", 0, true},
		{"", 0, true},
		{"ten", 0, true},
		{"+0x10", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			c := New(Options{LookupEnv: noEnv})
			c.Set("k", tt.value)
			got, err := c.GetInt("k", -1)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidValue) || !strings.HasPrefix(err.Error(), "k: ") {
					t.Fatalf("GetInt(%q) = %d, %v; want ErrInvalidValue naming k", tt.value, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("GetInt(%q) = %d, %v; want %d", tt.value, got, err, tt.want)
			}
		})
	}
	c := New(Options{LookupEnv: noEnv})
	if got, err := c.GetInt("unset", 9); got != 9 || err != nil {
		t.Errorf("GetInt(unset) = %d, %v; want the default", got, err)
	}
	c.Set("big", "8589934592")
	if got, err := c.GetInt64("big", 0); got != 1<<33 || err != nil {
		t.Errorf("GetInt64 = %d, %v", got, err)
	}
}

func TestGetFloatReadsJavaFloats(t *testing.T) {
	tests := []struct {
		value   string
		want    float32
		wantErr bool
	}{
		{"50", 50, false},
		{" 12.5 ", 12.5, false},
		{"1e2", 100, false},
		{"2.5f", 2.5, false},
		{"2.5D", 2.5, false},
		{".5", 0.5, false},
		{"-1", -1, false},
		{"0x1p3", 8, false},
		{"Infinity", float32(math.Inf(1)), false},
		{"inf", 0, true},
		{"1_0", 0, true},
		{"fifty", 0, true},
		{"", 0, true},
		{"[memory=1024,vcores=1]", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			c := New(Options{LookupEnv: noEnv})
			c.Set("k", tt.value)
			got, err := c.GetFloat("k", -3)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidValue) {
					t.Fatalf("GetFloat(%q) = %v, %v; want ErrInvalidValue", tt.value, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("GetFloat(%q) = %v, %v; want %v", tt.value, got, err, tt.want)
			}
		})
	}
	c := New(Options{LookupEnv: noEnv})
	c.Set("nan", "NaN")
	if got, _ := c.GetFloat("nan", 0); !math.IsNaN(float64(got)) {
		t.Errorf("GetFloat(NaN) = %v", got)
	}
}

// Hadoop's getBoolean falls back to the default on anything but true/false,
// so a typo in yarn.acl.enable leaves ACLs at their default, not an error.
func TestGetBoolFallsBackLikeHadoop(t *testing.T) {
	tests := []struct {
		value string
		def   bool
		want  bool
	}{
		{"true", false, true},
		{" TRUE ", false, true},
		{"False", true, false},
		{"yes", false, false},
		{"yes", true, true},
		{"1", false, false},
	}
	for _, tt := range tests {
		c := New(Options{LookupEnv: noEnv})
		c.Set("k", tt.value)
		if got, err := c.GetBool("k", tt.def); got != tt.want || err != nil {
			t.Errorf("GetBool(%q, %v) = %v, %v; want %v", tt.value, tt.def, got, err, tt.want)
		}
	}
}

func TestGetDurationReadsHadoopSuffixes(t *testing.T) {
	tests := []struct {
		value   string
		unit    time.Duration
		want    time.Duration
		wantErr bool
	}{
		{"600000", time.Millisecond, 10 * time.Minute, false},
		{"86400", time.Second, 24 * time.Hour, false},
		{"10ms", time.Second, 10 * time.Millisecond, false},
		{"10MS", time.Second, 10 * time.Millisecond, false},
		{"3s", time.Millisecond, 3 * time.Second, false},
		{"5m", time.Millisecond, 5 * time.Minute, false},
		{"2h", time.Millisecond, 2 * time.Hour, false},
		{"1d", time.Millisecond, 24 * time.Hour, false},
		{"7ns", time.Second, 7, false},
		{"7us", time.Second, 7 * time.Microsecond, false},
		{" 4s ", time.Millisecond, 4 * time.Second, false},
		{"1.5h", time.Millisecond, 0, true},
		{"5 minutes", time.Millisecond, 0, true},
		{"s", time.Millisecond, 0, true},
		{"999999999999d", time.Millisecond, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			c := New(Options{LookupEnv: noEnv})
			c.Set("k", tt.value)
			got, err := c.GetDuration("k", -1, tt.unit)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidValue) {
					t.Fatalf("GetDuration(%q) = %v, %v; want ErrInvalidValue", tt.value, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("GetDuration(%q) = %v, %v; want %v", tt.value, got, err, tt.want)
			}
		})
	}
}

func TestGetStringsTrimsAndDropsEmptyItems(t *testing.T) {
	c := fromXML(t, Options{}, props(
		"queues", " a, b ,,\n c ,",
		"blank", " ",
		"one", "${queues}",
	))
	tests := []struct {
		name string
		want []string
	}{
		{"queues", []string{"a", "b", "c"}},
		{"blank", []string{}},
		{"one", []string{"a", "b", "c"}},
		{"unset", []string{"default"}},
	}
	for _, tt := range tests {
		got, err := c.GetStrings(tt.name, []string{"default"})
		if err != nil || !slices.Equal(got, tt.want) || got == nil {
			t.Errorf("GetStrings(%s) = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

// A substitution error reaches the caller of every typed getter.
func TestTypedGettersReportSubstitutionErrors(t *testing.T) {
	c := fromXML(t, Options{}, props("v", "1", "k", strings.Repeat("${v}", 25)))
	if _, err := c.GetInt("k", 0); !errors.Is(err, ErrSubstitution) {
		t.Errorf("GetInt: %v", err)
	}
	if _, err := c.GetBool("k", false); !errors.Is(err, ErrSubstitution) {
		t.Errorf("GetBool: %v", err)
	}
	if _, err := c.GetStrings("k", nil); !errors.Is(err, ErrSubstitution) {
		t.Errorf("GetStrings: %v", err)
	}
}
