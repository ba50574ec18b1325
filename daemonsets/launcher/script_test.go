package launcher

import (
	"slices"
	"strings"
	"testing"

	"github.com/knitdev/knit/rks/launch"
)

// files is a task container as knit-node describes it.
func files() launch.Files {
	return launch.Files{
		ContainerID:   "container_1700000000000_0001_01_000002",
		User:          "alice",
		NMHost:        "node1",
		NMPort:        8041,
		NMHTTPPort:    8042,
		LocalDirs:     []string{"/l1/usercache/alice/appcache/application_1700000000000_0001", "/l2/usercache/alice/appcache/application_1700000000000_0001"},
		LocalUserDirs: []string{"/l1/usercache/alice/", "/l2/usercache/alice/"},
		LogDirs:       []string{"/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002", "/logs2/x"},
		WorkDir:       "/l1/usercache/alice/appcache/application_1700000000000_0001/container_1700000000000_0001_01_000002",
		TokenFile:     "/l1/usercache/alice/appcache/application_1700000000000_0001/container_1700000000000_0001_01_000002/container_tokens",
		HomeDir:       "/home/",
		Commands:      []string{"true"},
	}
}

func TestScriptIsTheNodeManagersLaunchScript(t *testing.T) {
	f := files()
	f.AuxServices = map[string][]byte{"mapreduce_shuffle": {0, 0, 0x34, 0x4a}}
	f.Whitelist = []launch.EnvVar{{Name: "JAVA_HOME", Value: "/usr/lib/jvm/java-11"}, {Name: "PATH", Value: "/usr/bin:/bin"}}
	f.Env = []launch.EnvVar{
		{Name: "CLASSPATH", Value: "{{PWD}}<CPS>{{HADOOP_CONF_DIR}}<CPS>job.jar/*"},
		{Name: "PATH", Value: "{{PATH}}<CPS>./bin"},
	}
	f.Commands = []string{"{{JAVA_HOME}}/bin/java", "-Dlog.dir=<LOG_DIR>", "Main", "1><LOG_DIR>/stdout", "2><LOG_DIR>/stderr"}
	want := `#!/bin/bash

set -o pipefail -e
echo "Setting up env variables"
export JAVA_HOME=${JAVA_HOME:-"/usr/lib/jvm/java-11"}
export HADOOP_TOKEN_FILE_LOCATION="/l1/usercache/alice/appcache/application_1700000000000_0001/container_1700000000000_0001_01_000002/container_tokens"
export CONTAINER_ID="container_1700000000000_0001_01_000002"
export NM_PORT="8041"
export NM_HOST="node1"
export NM_HTTP_PORT="8042"
export LOCAL_DIRS="/l1/usercache/alice/appcache/application_1700000000000_0001,/l2/usercache/alice/appcache/application_1700000000000_0001"
export LOCAL_USER_DIRS="/l1/usercache/alice/,/l2/usercache/alice/"
export LOG_DIRS="/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002,/logs2/x"
export USER="alice"
export LOGNAME="alice"
export HOME="/home/"
export PWD="/l1/usercache/alice/appcache/application_1700000000000_0001/container_1700000000000_0001_01_000002"
export JVM_PID="$$"
export NM_AUX_SERVICE_mapreduce_shuffle="AAA0Sg=="
export CLASSPATH="$PWD:$HADOOP_CONF_DIR:job.jar/*"
export PATH="$PATH:./bin"
echo "Copying debugging information"
# Creating copy of launch script
cp "launch_container.sh" "/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002/launch_container.sh"
chmod 640 "/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002/launch_container.sh"
# Determining directory contents
echo "ls -l:" 1>"/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002/directory.info"
ls -l 1>>"/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002/directory.info" || true
echo "find -L . -maxdepth 5 -ls:" 1>>"/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002/directory.info"
find -L . -maxdepth 5 -ls 1>>"/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002/directory.info" || true
echo "broken symlinks(find -L . -maxdepth 5 -type l -ls):" 1>>"/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002/directory.info"
find -L . -maxdepth 5 -type l -ls 1>>"/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002/directory.info" || true
echo "Launching container"
exec /bin/bash -c "$JAVA_HOME/bin/java -Dlog.dir=/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002 Main 1>/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002/stdout 2>/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002/stderr"
`
	if got := Script(f, nil, ""); got != want {
		t.Errorf("script:\n%s\nwant:\n%s", got, want)
	}
}

func TestScript(t *testing.T) {
	const logDir = "/logs/application_1700000000000_0001/container_1700000000000_0001_01_000002"
	tests := []struct {
		name     string
		change   func(*launch.Files)
		admin    []launch.EnvVar
		addOpens string
		want     []string // lines, in this order
		absent   []string // text found nowhere
	}{
		{
			name: "commands are expanded and joined by a space into one bash -c",
			change: func(f *launch.Files) {
				f.Commands = []string{"{{JAVA_HOME}}/bin/java -cp a<CPS>b <ADD_OPENS> Main", "1><LOG_DIR>/stdout", "2><LOG_DIR>/stderr"}
			},
			want: []string{`exec /bin/bash -c "$JAVA_HOME/bin/java -cp a:b  Main 1>` + logDir + `/stdout 2>` + logDir + `/stderr"`},
		},
		{
			name: "<ADD_OPENS> becomes nothing for a JVM older than 17",
			change: func(f *launch.Files) {
				f.Commands = []string{"{{JAVA_HOME}}/bin/java <ADD_OPENS> -Xmx100m AM"}
			},
			want:   []string{`exec /bin/bash -c "$JAVA_HOME/bin/java  -Xmx100m AM"`},
			absent: []string{"ADD_OPENS", "add-opens"},
		},
		{
			name: "<ADD_OPENS> becomes Hadoop's JDK 17 flags in commands and environment values",
			change: func(f *launch.Files) {
				f.Commands = []string{"{{JAVA_HOME}}/bin/java <ADD_OPENS> -Xmx100m AM"}
				f.Env = []launch.EnvVar{{Name: "OPTS", Value: "-Xss1m <ADD_OPENS>"}}
			},
			addOpens: AddOpensJDK17,
			want: []string{
				`export OPTS="-Xss1m --add-opens=java.base/java.lang=ALL-UNNAMED --add-exports=java.base/sun.net.dns=ALL-UNNAMED --add-exports=java.base/sun.net.util=ALL-UNNAMED"`,
				`exec /bin/bash -c "$JAVA_HOME/bin/java --add-opens=java.base/java.lang=ALL-UNNAMED --add-exports=java.base/sun.net.dns=ALL-UNNAMED --add-exports=java.base/sun.net.util=ALL-UNNAMED -Xmx100m AM"`,
			},
			absent: []string{"ADD_OPENS"},
		},
		{
			name: "the NodeManager's variables come in sanitizeEnv's order",
			change: func(f *launch.Files) {
				f.LocalizationCounters = "1,2,3,4,5"
				f.AuxServices = map[string][]byte{"mapreduce_shuffle": {0, 0, 0x34, 0x4a}}
			},
			want: []string{
				`export HADOOP_TOKEN_FILE_LOCATION="` + files().TokenFile + `"`,
				`export CONTAINER_ID="container_1700000000000_0001_01_000002"`,
				`export NM_PORT="8041"`, `export NM_HOST="node1"`, `export NM_HTTP_PORT="8042"`,
				`export LOCAL_DIRS="` + strings.Join(files().LocalDirs, ",") + `"`,
				`export LOCAL_USER_DIRS="/l1/usercache/alice/,/l2/usercache/alice/"`,
				`export LOG_DIRS="` + strings.Join(files().LogDirs, ",") + `"`,
				`export USER="alice"`, `export LOGNAME="alice"`, `export HOME="/home/"`,
				`export PWD="` + files().WorkDir + `"`,
				`export LOCALIZATION_COUNTERS="1,2,3,4,5"`,
				`export JVM_PID="$$"`,
				`export NM_AUX_SERVICE_mapreduce_shuffle="AAA0Sg=="`,
			},
		},
		{
			name: "the script copies itself and lists the work folder into the first log folder before the command",
			want: []string{
				`cp "launch_container.sh" "` + logDir + `/launch_container.sh"`,
				`chmod 640 "` + logDir + `/launch_container.sh"`,
				`echo "ls -l:" 1>"` + logDir + `/directory.info"`,
				`find -L . -maxdepth 5 -type l -ls 1>>"` + logDir + `/directory.info" || true`,
				`echo "Launching container"`,
			},
		},
		{
			name:   "without a log folder there is no debugging information",
			change: func(f *launch.Files) { f.LogDirs = nil },
			absent: []string{"directory.info", "cp "},
		},
		{
			name: "env values are expanded",
			change: func(f *launch.Files) {
				f.Env = []launch.EnvVar{{Name: "CLASSPATH", Value: "{{PWD}}<CPS>{{HADOOP_CONF_DIR}}<CPS><LOG_DIR>/x"}}
			},
			want: []string{`export CLASSPATH="$PWD:$HADOOP_CONF_DIR:` + logDir + `/x"`},
		},
		{
			name: "env values are written as given, quotes and all",
			change: func(f *launch.Files) {
				f.Env = []launch.EnvVar{{Name: "OPTS", Value: `-Da='b c' $(id -u)`}}
			},
			want: []string{`export OPTS="-Da='b c' $(id -u)"`},
		},
		{
			name: "the NodeManager's variables win over the application's",
			change: func(f *launch.Files) {
				f.Env = []launch.EnvVar{
					{Name: "CONTAINER_ID", Value: "fake"}, {Name: "USER", Value: "mallory"},
					{Name: "HOME", Value: "/root"}, {Name: "PWD", Value: "/"}, {Name: "LOCAL_DIRS", Value: "/tmp"},
					{Name: "HADOOP_TOKEN_FILE_LOCATION", Value: "/tmp/t"}, {Name: "JVM_PID", Value: "1"},
					{Name: "NM_AUX_SERVICE_mapreduce_shuffle", Value: "x"},
				}
				f.AuxServices = map[string][]byte{"mapreduce_shuffle": {0, 0, 0x34, 0x4a}}
			},
			want: []string{
				`export HADOOP_TOKEN_FILE_LOCATION="` + files().TokenFile + `"`,
				`export CONTAINER_ID="container_1700000000000_0001_01_000002"`,
				`export USER="alice"`, `export HOME="/home/"`, `export PWD="` + files().WorkDir + `"`,
				`export JVM_PID="$$"`, `export NM_AUX_SERVICE_mapreduce_shuffle="AAA0Sg=="`,
			},
			absent: []string{"fake", "mallory", "/root", `PWD="/"`, "/tmp", `JVM_PID="1"`, `="x"`},
		},
		{
			name: "a variable comes after the variables its value refers to",
			change: func(f *launch.Files) {
				f.Env = []launch.EnvVar{
					{Name: "A", Value: "$B/a"}, {Name: "D", Value: "d"}, {Name: "B", Value: "${C}b"}, {Name: "C", Value: "{{E}}/c"}, {Name: "E", Value: "e"},
				}
			},
			want: []string{`export E="e"`, `export C="$E/c"`, `export B="${C}b"`, `export A="$B/a"`, `export D="d"`},
		},
		{
			name: "variables referring to each other keep their given order",
			change: func(f *launch.Files) {
				f.Env = []launch.EnvVar{{Name: "A", Value: "$B"}, {Name: "B", Value: "$A"}, {Name: "C", Value: "$A"}}
			},
			want: []string{`export A="$B"`, `export B="$A"`, `export C="$A"`},
		},
		{
			name: "a variable referring to itself stays where it is",
			change: func(f *launch.Files) {
				f.Env = []launch.EnvVar{{Name: "PATH", Value: "$PATH:/x"}, {Name: "A", Value: "a"}}
			},
			want: []string{`export PATH="$PATH:/x"`, `export A="a"`},
		},
		{
			name: "whitelisted node values let the image's win and give way to the application's and the NodeManager's",
			change: func(f *launch.Files) {
				f.Whitelist = []launch.EnvVar{
					{Name: "JAVA_HOME", Value: "/jdk"}, {Name: "PATH", Value: "/usr/bin"}, {Name: "USER", Value: "yarn"},
				}
				f.Env = []launch.EnvVar{{Name: "PATH", Value: "/app/bin"}}
			},
			want:   []string{`export JAVA_HOME=${JAVA_HOME:-"/jdk"}`, `export CONTAINER_ID="container_1700000000000_0001_01_000002"`, `export PATH="/app/bin"`},
			absent: []string{"/usr/bin", "yarn"},
		},
		{
			name: "aux service data is base64, one variable per service, sorted",
			change: func(f *launch.Files) {
				f.AuxServices = map[string][]byte{"spark_shuffle": {0, 0, 0x1b, 0xdf}, "mapreduce_shuffle": {0, 0, 0x34, 0x4a}}
			},
			want: []string{`export NM_AUX_SERVICE_mapreduce_shuffle="AAA0Sg=="`, `export NM_AUX_SERVICE_spark_shuffle="AAAb3w=="`},
		},
		{
			name: "an AM gets its submit time and web proxy base over the application's",
			change: func(f *launch.Files) {
				f.AppSubmitTime = 1700000000123
				f.WebProxyBase = "/proxy/application_1700000000000_0001"
				f.Env = []launch.EnvVar{{Name: "APP_SUBMIT_TIME_ENV", Value: "1"}}
			},
			want: []string{`export APP_SUBMIT_TIME_ENV="1700000000123"`, `export APPLICATION_WEB_PROXY_BASE="/proxy/application_1700000000000_0001"`},
		},
		{
			name: "the node's localization counters, over the application's",
			change: func(f *launch.Files) {
				f.LocalizationCounters = "100,20,3,1,42"
				f.Env = []launch.EnvVar{{Name: "LOCALIZATION_COUNTERS", Value: "mine"}}
			},
			want:   []string{`export LOCALIZATION_COUNTERS="100,20,3,1,42"`},
			absent: []string{`LOCALIZATION_COUNTERS="mine"`},
		},
		{
			name:   "a task gets neither AM variable",
			absent: []string{"APP_SUBMIT_TIME_ENV", "APPLICATION_WEB_PROXY_BASE"},
		},
		{
			name:   "no token file, no HADOOP_TOKEN_FILE_LOCATION",
			change: func(f *launch.Files) { f.TokenFile = "" },
			absent: []string{"HADOOP_TOKEN_FILE_LOCATION"},
		},
		{
			name:   "HOME defaults to YARN's /home/",
			change: func(f *launch.Files) { f.HomeDir = "" },
			want:   []string{`export HOME="/home/"`},
		},
		{
			name:   "the node's MALLOC_ARENA_MAX is forced over the application's",
			change: func(f *launch.Files) { f.Env = []launch.EnvVar{{Name: "MALLOC_ARENA_MAX", Value: "8"}} },
			admin:  []launch.EnvVar{{Name: "MALLOC_ARENA_MAX", Value: "4"}},
			want:   []string{`export MALLOC_ARENA_MAX="4"`},
			absent: []string{`"8"`},
		},
		{
			name:   "no MALLOC_ARENA_MAX on the node, none in the script",
			absent: []string{"MALLOC_ARENA_MAX"},
		},
		{
			name: "a variable given twice keeps its first place and its last value",
			change: func(f *launch.Files) {
				f.Env = []launch.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "b"}, {Name: "A", Value: "2"}}
			},
			want:   []string{`export A="2"`, `export B="b"`},
			absent: []string{`A="1"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := files()
			if tt.change != nil {
				tt.change(&f)
			}
			script := Script(f, tt.admin, tt.addOpens)
			lines := strings.Split(script, "\n")
			at := 0
			for _, w := range tt.want {
				i := slices.Index(lines[at:], w)
				if i < 0 {
					t.Fatalf("no line %q after line %d in\n%s", w, at+1, script)
				}
				at += i + 1
			}
			for _, a := range tt.absent {
				if strings.Contains(script, a) {
					t.Errorf("%q in\n%s", a, script)
				}
			}
		})
	}
}

func TestEnvDependenciesReadsTheValueAsBashDoes(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  []string
	}{
		{name: "plain and braced references", value: "$A/x:${B}:${#C}", want: []string{"A", "B", "C"}},
		{name: "references back to back", value: "$A$B", want: []string{"A", "B"}},
		{name: "a name ends at a character that is not a letter, digit or underscore", value: "$A_1-$B.c", want: []string{"A_1", "B"}},
		{name: "the shell's pid is no variable", value: "$$A", want: nil},
		{name: "positional parameters are no variables", value: "$1 $@", want: nil},
		{name: "an escaped dollar is no reference", value: `\$A $B`, want: []string{"B"}},
		{name: "single quotes inside the double quotes hide nothing", value: "'$A'", want: []string{"A"}},
		{name: "single quotes between nested double quotes hide", value: `"'$A'"$B`, want: []string{"B"}},
		{name: "a trailing dollar", value: "a$", want: nil},
		{name: "a name given twice counts once", value: "$A:$A", want: []string{"A"}},
		{name: "non-ASCII letters", value: "$Ünï", want: []string{"Ünï"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := envDependencies(tt.value); !slices.Equal(got, tt.want) {
				t.Errorf("envDependencies(%q) = %q, want %q", tt.value, got, tt.want)
			}
		})
	}
}

// FuzzOrderEnvByDependencies reads application values, which are the
// application's to choose: parsing them must not panic, and ordering must
// keep every variable once and put each after those it refers to, cycles
// apart.
func FuzzOrderEnvByDependencies(f *testing.F) {
	for _, seed := range [][3]string{
		{"$B", "${C}", "c"}, {"$B", "$A", "$C"}, {`"'$B'"`, `\$C`, "${#A}"}, {"$", "${", `\`}, {"$$B", "'", `"`},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, a, b, c string) {
		env := []launch.EnvVar{{Name: "A", Value: a}, {Name: "B", Value: b}, {Name: "C", Value: c}}
		got := orderEnvByDependencies(slices.Clone(env))
		pos := make(map[string]int)
		for i, v := range got {
			pos[v.Name] = i
		}
		if len(got) != len(env) || len(pos) != len(env) {
			t.Fatalf("ordered %v into %v", env, got)
		}
		refers := func(from, to string) bool {
			return slices.Contains(envDependencies(env[from[0]-'A'].Value), to)
		}
		for _, v := range env {
			for _, d := range envDependencies(v.Value) {
				if _, ok := pos[d]; !ok || d == v.Name {
					continue
				}
				// A cycle through v and d excuses any order.
				cycle := refers(d, v.Name) || slices.ContainsFunc(env, func(w launch.EnvVar) bool {
					return refers(d, w.Name) && refers(w.Name, v.Name)
				})
				if !cycle && pos[d] > pos[v.Name] {
					t.Fatalf("%s refers to %s but comes first in %v", v.Name, d, got)
				}
			}
		}
	})
}
