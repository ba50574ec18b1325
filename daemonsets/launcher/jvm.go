package launcher

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/knitdev/knit/rks/launch"
)

// AddOpensJDK17 is what <ADD_OPENS> becomes for a JVM of version 17 or
// newer: ContainerLaunch.ADDITIONAL_JDK17_PLUS_OPTIONS of Hadoop 3.4.1
// (MAPREDUCE-7449, extended by MAPREDUCE-7456), to the byte.
const AddOpensJDK17 = "--add-opens=java.base/java.lang=ALL-UNNAMED " +
	"--add-exports=java.base/sun.net.dns=ALL-UNNAMED " +
	"--add-exports=java.base/sun.net.util=ALL-UNNAMED"

// EnvAddOpens, in knit-launcher's own environment (the pod's), forces what
// <ADD_OPENS> becomes: "true" the JDK 17 flags, "false" nothing; unset,
// empty or "auto" decides from the container's JVM. Hadoop has no setting
// for this: ContainerLaunch.expandEnvironment asks the NodeManager's own
// JVM (Shell.isJavaVersionAtLeast(17)), and the one property near it,
// mapreduce.jvm.add-opens-as-default, is the MapReduce client's choice of
// whether to put <ADD_OPENS> in its commands at all.
const EnvAddOpens = "KNIT_ADD_OPENS"

// AddOpens returns what <ADD_OPENS> becomes in the container f describes,
// and why, for the log. The NodeManager decides by the JVM it runs on
// itself, which in YARN is the JVM its containers run too. Here the JVM
// is the container's: the one its JAVA_HOME names once the launch script
// has set its environment (the image's value, the node's whitelisted one,
// the application's), read from that JVM's release file. No JAVA_HOME,
// one the launcher cannot work out without running the application's
// shell code, or no release file leaves nothing: JDK 9 and newer always
// ship that file, and a JVM older than 9 refuses --add-opens and would
// not start, while leaving the flags out costs a JDK 17 JVM nothing until
// code needs the reflection they open.
func AddOpens(f launch.Files, admin []launch.EnvVar, environ []string) (flags, why string) {
	switch mode := strings.ToLower(strings.TrimSpace(lookupEnv(environ, EnvAddOpens))); mode {
	case "true":
		return AddOpensJDK17, EnvAddOpens + "=true"
	case "false":
		return "", EnvAddOpens + "=false"
	case "", "auto":
	default:
		return "", fmt.Sprintf("%s=%q is neither true, false nor auto", EnvAddOpens, mode)
	}
	javaHome, ok := resolveEnv(f, admin, environ)["JAVA_HOME"]
	switch {
	case !ok:
		return "", "JAVA_HOME is set by shell code the launcher does not run"
	case javaHome == "":
		return "", "no JAVA_HOME"
	case !filepath.IsAbs(javaHome):
		javaHome = filepath.Join(f.WorkDir, javaHome)
	}
	release := filepath.Join(javaHome, "release")
	b, err := os.ReadFile(release)
	if err != nil {
		return "", fmt.Sprintf("no release file: %v", err)
	}
	version := javaVersion(b)
	major := javaMajor(version)
	if major < 17 {
		return "", fmt.Sprintf("%s has JAVA_VERSION %q", release, version)
	}
	return AddOpensJDK17, fmt.Sprintf("%s has JAVA_VERSION %q", release, version)
}

// javaVersion is the JAVA_VERSION of a JVM's release file, unquoted.
func javaVersion(release []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(release))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "JAVA_VERSION="); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return ""
}

// javaMajor is the feature version of a JAVA_VERSION value: 8 for
// "1.8.0_392", 17 for "17.0.15", 21 for "21", 22 for "22-ea"; 0 when it
// does not read.
func javaMajor(v string) int {
	v = strings.TrimPrefix(v, "1.")
	end := 0
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(v[:end])
	if err != nil {
		return 0
	}
	return n
}

func lookupEnv(environ []string, name string) string {
	for i := len(environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(environ[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// resolveEnv is the environment the launch script leaves for the
// container's command, as far as it can be known without running bash:
// environ (the image's) with every export of the script applied in order.
// A variable whose value runs shell code (command substitution, a
// parameter operator, quotes of its own) or refers to such a variable is
// left out, as unknown.
func resolveEnv(f launch.Files, admin []launch.EnvVar, environ []string) map[string]string {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if name, value, ok := strings.Cut(kv, "="); ok {
			env[name] = value
		}
	}
	unknown := make(map[string]bool)
	lookup := func(name string) (string, bool) {
		if unknown[name] {
			return "", false
		}
		return env[name], true
	}
	for _, e := range exports(f, admin, "") {
		if e.whitelisted {
			// export V=${V:-"value"}: a value the image set wins.
			if unknown[e.name] || env[e.name] != "" {
				continue
			}
		}
		v, ok := evalDoubleQuoted(e.value, lookup)
		if !ok {
			delete(env, e.name)
			unknown[e.name] = true
			continue
		}
		env[e.name] = v
		delete(unknown, e.name)
	}
	return env
}

// evalDoubleQuoted is what bash makes of s written between double quotes,
// when s only refers to variables ($X, ${X}) and escapes \$, \`, \", \\
// and a newline; ok is false for anything else a $ or a backquote can
// start, for a bare double quote, and for a reference lookup cannot
// resolve. An unset variable is empty, as in bash without set -u.
func evalDoubleQuoted(s string, lookup func(string) (string, bool)) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
				i++
				if s[i] != '\n' {
					b.WriteByte(s[i])
				}
				continue
			}
			b.WriteByte(c)
		case '`', '"':
			return "", false
		case '$':
			if i+1 == len(s) {
				b.WriteByte(c)
				continue
			}
			var name string
			switch next := s[i+1]; {
			case next == '{':
				end := strings.IndexByte(s[i+2:], '}')
				if end < 0 {
					return "", false
				}
				name = s[i+2 : i+2+end]
				if !isName(name) {
					return "", false
				}
				i += 2 + end
			case next == '_' || isLetter(next):
				j := i + 1
				for j < len(s) && (s[j] == '_' || isLetter(s[j]) || (s[j] >= '0' && s[j] <= '9')) {
					j++
				}
				name = s[i+1 : j]
				i = j - 1
			case strings.IndexByte("({$#?*@!-0123456789", next) >= 0:
				return "", false
			default:
				b.WriteByte(c)
				continue
			}
			v, ok := lookup(name)
			if !ok {
				return "", false
			}
			b.WriteString(v)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// isName reports whether s is a shell variable name, ASCII as bash reads
// one in the C locale.
func isName(s string) bool {
	if s == "" || !(s[0] == '_' || isLetter(s[0])) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !(s[i] == '_' || isLetter(s[i]) || (s[i] >= '0' && s[i] <= '9')) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
