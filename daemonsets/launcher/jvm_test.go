package launcher

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/knitdev/knit/rks/launch"
)

// jvm makes a JVM home under dir named name whose release file says
// version; an empty version makes one without a release file.
func jvm(t *testing.T, dir, name, version string) string {
	t.Helper()
	home := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Join(home, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if version != "" {
		release := "IMPLEMENTOR=\"Eclipse Adoptium\"\nJAVA_RUNTIME_VERSION=\"x\"\nJAVA_VERSION=\"" + version + "\"\nOS_NAME=\"Linux\"\n"
		if err := os.WriteFile(filepath.Join(home, "release"), []byte(release), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

func TestAddOpensFollowsTheJVMTheContainerRuns(t *testing.T) {
	dir := t.TempDir()
	jdk17 := jvm(t, dir, "jdk17", "17.0.15")
	jdk21 := jvm(t, dir, "jdk21", "21")
	jdk8 := jvm(t, dir, "jdk8", "1.8.0_392")
	jdk11 := jvm(t, dir, "jdk11", "11.0.2")
	bare := jvm(t, dir, "bare", "")
	work := filepath.Join(dir, "work")
	jvm(t, work, "jdk", "22-ea")

	tests := []struct {
		name    string
		environ []string // the image's
		change  func(*launch.Files)
		want    string
	}{
		{name: "the image's JDK 17", environ: []string{"JAVA_HOME=" + jdk17}, want: AddOpensJDK17},
		{name: "the image's JDK 21, whose version has no dots", environ: []string{"JAVA_HOME=" + jdk21}, want: AddOpensJDK17},
		{name: "the image's JDK 8 gets nothing", environ: []string{"JAVA_HOME=" + jdk8}},
		{name: "the image's JDK 11 gets nothing", environ: []string{"JAVA_HOME=" + jdk11}},
		{name: "a JVM without a release file gets nothing", environ: []string{"JAVA_HOME=" + bare}},
		{name: "a JAVA_HOME that is no folder gets nothing", environ: []string{"JAVA_HOME=" + filepath.Join(dir, "none")}},
		{name: "no JAVA_HOME gets nothing"},
		{
			name:   "the node's whitelisted JAVA_HOME when the image has none",
			change: func(f *launch.Files) { f.Whitelist = []launch.EnvVar{{Name: "JAVA_HOME", Value: jdk17}} },
			want:   AddOpensJDK17,
		},
		{
			name:    "the image's JAVA_HOME over the node's whitelisted one",
			environ: []string{"JAVA_HOME=" + jdk8},
			change:  func(f *launch.Files) { f.Whitelist = []launch.EnvVar{{Name: "JAVA_HOME", Value: jdk17}} },
		},
		{
			name:    "an empty JAVA_HOME in the image gives way to the node's, as ${V:-...} does",
			environ: []string{"JAVA_HOME="},
			change:  func(f *launch.Files) { f.Whitelist = []launch.EnvVar{{Name: "JAVA_HOME", Value: jdk17}} },
			want:    AddOpensJDK17,
		},
		{
			name:    "the application's JAVA_HOME over the image's and the node's",
			environ: []string{"JAVA_HOME=" + jdk8},
			change: func(f *launch.Files) {
				f.Whitelist = []launch.EnvVar{{Name: "JAVA_HOME", Value: jdk8}}
				f.Env = []launch.EnvVar{{Name: "JAVA_HOME", Value: jdk21}}
			},
			want: AddOpensJDK17,
		},
		{
			name:    "the application's JAVA_HOME that refers to its other variables",
			environ: []string{"JAVA_HOME=" + jdk8},
			change: func(f *launch.Files) {
				f.Env = []launch.EnvVar{{Name: "JAVA_HOME", Value: "${JVMS}/{{JDK}}"}, {Name: "JVMS", Value: dir}, {Name: "JDK", Value: "jdk17"}}
			},
			want: AddOpensJDK17,
		},
		{
			name:   "a JDK shipped as a local resource, under {{PWD}}",
			change: func(f *launch.Files) { f.Env = []launch.EnvVar{{Name: "JAVA_HOME", Value: "{{PWD}}/jdk"}} },
			want:   AddOpensJDK17,
		},
		{
			name:   "a relative JAVA_HOME is the work folder's",
			change: func(f *launch.Files) { f.Env = []launch.EnvVar{{Name: "JAVA_HOME", Value: "./jdk"}} },
			want:   AddOpensJDK17,
		},
		{
			name:    "a JAVA_HOME made by a command substitution is not guessed",
			environ: []string{"JAVA_HOME=" + jdk17},
			change: func(f *launch.Files) {
				f.Env = []launch.EnvVar{{Name: "JAVA_HOME", Value: "$(dirname $(dirname $(readlink -f $(which java))))"}}
			},
		},
		{
			name:    "a JAVA_HOME referring to a variable made by shell code is not guessed",
			environ: []string{"JAVA_HOME=" + jdk17},
			change: func(f *launch.Files) {
				f.Env = []launch.EnvVar{{Name: "JAVA_HOME", Value: "$BASE/jdk17"}, {Name: "BASE", Value: "`echo " + dir + "`"}}
			},
		},
		{
			name:    "KNIT_ADD_OPENS=true forces the flags without a JVM",
			environ: []string{EnvAddOpens + "=true"},
			want:    AddOpensJDK17,
		},
		{
			name:    "KNIT_ADD_OPENS=false forces nothing on JDK 17",
			environ: []string{"JAVA_HOME=" + jdk17, EnvAddOpens + "=FALSE"},
		},
		{
			name:    "KNIT_ADD_OPENS=auto looks at the JVM",
			environ: []string{"JAVA_HOME=" + jdk17, EnvAddOpens + "=auto"},
			want:    AddOpensJDK17,
		},
		{
			name:    "KNIT_ADD_OPENS set to anything else gives nothing",
			environ: []string{"JAVA_HOME=" + jdk17, EnvAddOpens + "=yes"},
		},
		{
			name:    "the application cannot force it",
			environ: []string{"JAVA_HOME=" + jdk8},
			change:  func(f *launch.Files) { f.Env = []launch.EnvVar{{Name: EnvAddOpens, Value: "true"}} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := files()
			f.WorkDir = work
			if tt.change != nil {
				tt.change(&f)
			}
			got, why := AddOpens(f, nil, tt.environ)
			if got != tt.want {
				t.Errorf("AddOpens = %q (%s), want %q", got, why, tt.want)
			}
			if why == "" {
				t.Error("no reason given")
			}
		})
	}
}

func TestJavaMajorReadsEveryVersionScheme(t *testing.T) {
	tests := []struct {
		version string
		want    int
	}{
		{"1.8.0_392", 8}, {"1.7.0", 7}, {"9", 9}, {"11.0.2", 11}, {"17.0.15", 17}, {"21", 21},
		{"22-ea", 22}, {"17+35", 17}, {"", 0}, {"abc", 0},
	}
	for _, tt := range tests {
		if got := javaMajor(tt.version); got != tt.want {
			t.Errorf("javaMajor(%q) = %d, want %d", tt.version, got, tt.want)
		}
	}
}

func TestJavaVersionIsTheReleaseFilesJAVA_VERSION(t *testing.T) {
	tests := []struct {
		name, release, want string
	}{
		{name: "quoted, among other keys", release: "IMPLEMENTOR=\"x\"\nJAVA_VERSION=\"17.0.15\"\n", want: "17.0.15"},
		{name: "JAVA_RUNTIME_VERSION is another key", release: "JAVA_RUNTIME_VERSION=\"17.0.15+6\"\nJAVA_VERSION=\"17.0.15\"\n", want: "17.0.15"},
		{name: "unquoted", release: "JAVA_VERSION=1.8.0_392", want: "1.8.0_392"},
		{name: "none", release: "OS_NAME=\"Linux\"\n", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := javaVersion([]byte(tt.release)); got != tt.want {
				t.Errorf("javaVersion = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEvalDoubleQuotedIsBashForPlainReferences(t *testing.T) {
	vars := map[string]string{"A": "a", "B_1": "b", "EMPTY": ""}
	lookup := func(name string) (string, bool) {
		if name == "UNKNOWN" {
			return "", false
		}
		return vars[name], true
	}
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{in: "/usr/lib/jvm/java-17", want: "/usr/lib/jvm/java-17", ok: true},
		{in: "$A/${B_1}:$EMPTY:$UNSET.", want: "a/b::.", ok: true},
		{in: "$A$B_1", want: "ab", ok: true},
		{in: `\$A \" \\ \x`, want: `$A " \ \x`, ok: true},
		{in: "cost $ 5 and a$", want: "cost $ 5 and a$", ok: true},
		{in: "$UNKNOWN/x"},
		{in: "$(pwd)"},
		{in: "`pwd`"},
		{in: "${A:-x}"},
		{in: "${#A}"},
		{in: "$$"},
		{in: "$1"},
		{in: `a"b"`},
		{in: "${A"},
	}
	for _, tt := range tests {
		got, ok := evalDoubleQuoted(tt.in, lookup)
		if ok != tt.ok || got != tt.want {
			t.Errorf("evalDoubleQuoted(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// TestEvalDoubleQuotedAgreesWithBash checks the evaluator against bash
// itself, on the values it claims to know.
func TestEvalDoubleQuotedAgreesWithBash(t *testing.T) {
	if _, err := os.Stat(bash); err != nil {
		t.Skip("no bash")
	}
	vars := map[string]string{"A": "a b", "B": "/x/y"}
	lookup := func(name string) (string, bool) { return vars[name], true }
	for _, in := range []string{"$A", "${B}/c", `\$A`, `\\$B`, "$A$B", "x$", `\x\y`, "$NOPE-", "a\\\nb"} {
		want, ok := evalDoubleQuoted(in, lookup)
		if !ok {
			t.Errorf("%q not evaluated", in)
			continue
		}
		script := "A='a b'; B=/x/y; printf %s \"" + in + "\""
		out, err := runBash(t, script)
		if err != nil {
			t.Fatal(err)
		}
		if out != want {
			t.Errorf("%q: bash says %q, evalDoubleQuoted %q", in, out, want)
		}
	}
}

func runBash(t *testing.T, script string) (string, error) {
	t.Helper()
	cmd := exec.Command(bash, "-c", script)
	cmd.Env = []string{}
	out, err := cmd.Output()
	return string(out), err
}
