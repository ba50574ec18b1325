package launcher

import (
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/knitdev/knit/rks/launch"
)

// ScriptName is the launch script's name in the work folder, where the
// NodeManager leaves it too (ContainerLaunch.CONTAINER_SCRIPT), so a user
// can read what ran.
const ScriptName = "launch_container.sh"

// Expansion markers of a launch context (ApplicationConstants), replaced
// in every command and every environment value before the script is
// written, as ContainerLaunch.expandEnvironment does on Linux.
const (
	markLogDir   = "<LOG_DIR>"
	markCPS      = "<CPS>"
	markAddOpens = "<ADD_OPENS>"
	markLeft     = "{{"
	markRight    = "}}"
)

// expand is ContainerLaunch.expandEnvironment for a Linux node; addOpens
// is what <ADD_OPENS> becomes (AddOpens).
func expand(s, logDir, addOpens string) string {
	s = strings.ReplaceAll(s, markLogDir, logDir)
	s = strings.ReplaceAll(s, markCPS, ":")
	s = strings.ReplaceAll(s, markAddOpens, addOpens)
	s = strings.ReplaceAll(s, markLeft, "$")
	return strings.ReplaceAll(s, markRight, "")
}

// usesAddOpens reports whether <ADD_OPENS> appears in f's commands or
// environment, so that the JVM need only be looked at then.
func usesAddOpens(f launch.Files) bool {
	for _, c := range f.Commands {
		if strings.Contains(c, markAddOpens) {
			return true
		}
	}
	for _, v := range f.Env {
		if strings.Contains(v.Value, markAddOpens) {
			return true
		}
	}
	return false
}

// directoryContents is the file in the container's first log folder
// where the launch script lists what the work folder holds
// (ContainerExecutor.DIRECTORY_CONTENTS), beside a copy of itself, as the
// NodeManager's does with yarn.nodemanager.log-container-debug-info.enabled,
// true by default since Hadoop 3.0 (YARN-7381).
const directoryContents = "directory.info"

// Script returns the launch script of a container, launch_container.sh as
// the NodeManager writes it (ContainerExecutor.writeLaunchEnv with
// ContainerLaunch's UnixShellScriptBuilder), less the parts knit-node has
// already done (resource links) and the prelaunch redirections, which the
// launcher does itself so the output also reaches the pod's log. admin is
// yarn.nodemanager.admin-env: variables forced over the application's.
// addOpens is what <ADD_OPENS> becomes (AddOpens).
//
// Values are written inside double quotes exactly as given, as YARN does:
// bash expands $VAR in them, and a value holding a double quote or a
// backquote is shell syntax, in YARN and here. Commands are expanded,
// joined by a space and handed to one `exec /bin/bash -c "..."`, again as
// YARN does.
func Script(f launch.Files, admin []launch.EnvVar, addOpens string) string {
	logDir := ""
	if len(f.LogDirs) > 0 {
		logDir = f.LogDirs[0]
	}
	var b strings.Builder
	b.WriteString("#!/bin/bash\n\n")
	b.WriteString("set -o pipefail -e\n")
	b.WriteString("echo \"Setting up env variables\"\n")
	for _, e := range exports(f, admin, addOpens) {
		if e.whitelisted {
			b.WriteString("export " + e.name + "=${" + e.name + ":-\"" + e.value + "\"}\n")
		} else {
			b.WriteString("export " + e.name + "=\"" + e.value + "\"\n")
		}
	}
	if logDir != "" {
		// UnixShellScriptBuilder's copyDebugInformation and
		// listDebugInformation. ls and find may fail on what the work
		// folder holds (a link loop), or be missing from the image: that
		// must not keep the container from starting, and with set -e it
		// would, so those four lines are told to carry on.
		script := logDir + "/" + ScriptName
		info := logDir + "/" + directoryContents
		b.WriteString("echo \"Copying debugging information\"\n")
		b.WriteString("# Creating copy of launch script\n")
		b.WriteString("cp \"" + ScriptName + "\" \"" + script + "\"\n")
		b.WriteString("chmod 640 \"" + script + "\"\n")
		b.WriteString("# Determining directory contents\n")
		b.WriteString("echo \"ls -l:\" 1>\"" + info + "\"\n")
		b.WriteString("ls -l 1>>\"" + info + "\" || true\n")
		b.WriteString("echo \"find -L . -maxdepth 5 -ls:\" 1>>\"" + info + "\"\n")
		b.WriteString("find -L . -maxdepth 5 -ls 1>>\"" + info + "\" || true\n")
		b.WriteString("echo \"broken symlinks(find -L . -maxdepth 5 -type l -ls):\" 1>>\"" + info + "\"\n")
		b.WriteString("find -L . -maxdepth 5 -type l -ls 1>>\"" + info + "\" || true\n")
	}
	b.WriteString("echo \"Launching container\"\n")
	cmds := make([]string, len(f.Commands))
	for i, c := range f.Commands {
		cmds[i] = expand(c, logDir, addOpens)
	}
	b.WriteString("exec /bin/bash -c \"" + strings.Join(cmds, " ") + "\"\n")
	return b.String()
}

// export is one variable the launch script exports, its value expanded.
// A whitelisted one is the node's value of a variable of
// yarn.nodemanager.env-whitelist, exported only where the image set none.
type export struct {
	name, value string
	whitelisted bool
}

// exports is every variable the launch script exports, in its order:
// the node's whitelisted values first, in a form that lets a value the
// image set win, so that the variables after them expand to the right
// one; then the NodeManager's; then the application's and admin's,
// ordered by their references.
func exports(f launch.Files, admin []launch.EnvVar, addOpens string) []export {
	logDir := ""
	if len(f.LogDirs) > 0 {
		logDir = f.LogDirs[0]
	}
	nm := nmEnv(f)
	nmNames := make(map[string]bool, len(nm))
	for _, v := range nm {
		nmNames[v.Name] = true
	}
	rest := appEnv(f, admin, nmNames)
	set := make(map[string]bool, len(rest))
	for i := range rest {
		rest[i].Value = expand(rest[i].Value, logDir, addOpens)
		set[rest[i].Name] = true
	}
	rest = orderEnvByDependencies(rest)

	out := make([]export, 0, len(f.Whitelist)+len(nm)+len(rest))
	for _, v := range f.Whitelist {
		if nmNames[v.Name] || set[v.Name] {
			continue
		}
		out = append(out, export{name: v.Name, value: v.Value, whitelisted: true})
	}
	for _, v := range nm {
		out = append(out, export{name: v.Name, value: expand(v.Value, logDir, addOpens)})
	}
	for _, v := range rest {
		out = append(out, export{name: v.Name, value: v.Value})
	}
	return out
}

// nmEnv is the variables the NodeManager sets and the application cannot
// override (ContainerLaunch.sanitizeEnv's nmVars), in its order.
func nmEnv(f launch.Files) []launch.EnvVar {
	var env []launch.EnvVar
	add := func(name, value string) { env = append(env, launch.EnvVar{Name: name, Value: value}) }
	if f.TokenFile != "" {
		add("HADOOP_TOKEN_FILE_LOCATION", f.TokenFile)
	}
	add("CONTAINER_ID", f.ContainerID)
	add("NM_PORT", strconv.Itoa(int(f.NMPort)))
	add("NM_HOST", f.NMHost)
	add("NM_HTTP_PORT", strconv.Itoa(int(f.NMHTTPPort)))
	add("LOCAL_DIRS", strings.Join(f.LocalDirs, ","))
	add("LOCAL_USER_DIRS", strings.Join(f.LocalUserDirs, ","))
	add("LOG_DIRS", strings.Join(f.LogDirs, ","))
	add("USER", f.User)
	add("LOGNAME", f.User)
	home := f.HomeDir
	if home == "" {
		home = "/home/" // YarnConfiguration.DEFAULT_NM_USER_HOME_DIR
	}
	add("HOME", home)
	add("PWD", f.WorkDir)
	if f.LocalizationCounters != "" {
		add("LOCALIZATION_COUNTERS", f.LocalizationCounters)
	}
	add("JVM_PID", "$$")
	// A Java HashMap gives the NodeManager's aux services no stable order;
	// sorted names give the script one.
	names := make([]string, 0, len(f.AuxServices))
	for name := range f.AuxServices {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		add("NM_AUX_SERVICE_"+name, base64.StdEncoding.EncodeToString(f.AuxServices[name]))
	}
	return env
}

// appEnv is every variable that is not the NodeManager's: the launch
// context's, then the two the RM's AMLauncher puts in an AM's launch
// context over the application's own, then admin, forced in too. A name
// given twice keeps its first place and its last value, as a map put does.
func appEnv(f launch.Files, admin []launch.EnvVar, nm map[string]bool) []launch.EnvVar {
	var env []launch.EnvVar
	at := make(map[string]int)
	put := func(name, value string) {
		if nm[name] {
			return
		}
		if i, ok := at[name]; ok {
			env[i].Value = value
			return
		}
		at[name] = len(env)
		env = append(env, launch.EnvVar{Name: name, Value: value})
	}
	for _, v := range f.Env {
		put(v.Name, v.Value)
	}
	if f.AppSubmitTime != 0 {
		put("APP_SUBMIT_TIME_ENV", strconv.FormatInt(f.AppSubmitTime, 10))
	}
	if f.WebProxyBase != "" {
		put("APPLICATION_WEB_PROXY_BASE", f.WebProxyBase)
	}
	for _, v := range admin {
		put(v.Name, v.Value)
	}
	return env
}

// orderEnvByDependencies puts a variable after the others of env its value
// refers to, so that bash expands each $REF to its new value, as
// ShellScriptBuilder.orderEnvByDependencies does. Variables that refer to
// each other in a cycle cannot all resolve; they keep their given order.
// Otherwise the given order is kept wherever no reference forces a change
// (YARN walks a HashMap, so its order there is arbitrary).
func orderEnvByDependencies(env []launch.EnvVar) []launch.EnvVar {
	if len(env) < 2 {
		return env
	}
	index := make(map[string]int, len(env))
	for i, v := range env {
		index[v.Name] = i
	}
	deps := make([][]int, len(env))
	for i, v := range env {
		for _, name := range envDependencies(v.Value) {
			if j, ok := index[name]; ok && j != i {
				deps[i] = append(deps[i], j)
			}
		}
	}
	// Tarjan's strongly connected components, visited in the given order:
	// a component is complete only after every component it depends on, so
	// emitting components as they complete puts dependencies first, and a
	// cycle is one component whose members are emitted in their given order.
	var (
		out     = make([]launch.EnvVar, 0, len(env))
		num     = make([]int, len(env)) // visit number + 1; 0 is unvisited
		low     = make([]int, len(env))
		onStack = make([]bool, len(env))
		stack   []int
		next    = 1
		visit   func(int)
	)
	visit = func(i int) {
		num[i], low[i] = next, next
		next++
		stack = append(stack, i)
		onStack[i] = true
		for _, j := range deps[i] {
			if num[j] == 0 {
				visit(j)
				low[i] = min(low[i], low[j])
			} else if onStack[j] {
				low[i] = min(low[i], num[j])
			}
		}
		if low[i] != num[i] {
			return
		}
		k := len(stack) - 1
		for stack[k] != i {
			k--
		}
		comp := slices.Clone(stack[k:])
		stack = stack[:k]
		slices.Sort(comp)
		for _, j := range comp {
			onStack[j] = false
			out = append(out, env[j])
		}
	}
	for i := range env {
		if num[i] == 0 {
			visit(i)
		}
	}
	return out
}

// envDependencies returns the names of the variables a value refers to
// ($X, ${X}, ${#X}), read as bash reads the inside of the double quotes the
// value is written in (UnixShellScriptBuilder.getEnvDependencies): a
// backslash escapes the next character, and within a nested pair of double
// quotes single quotes hide what they enclose.
func envDependencies(v string) []string {
	var deps []string
	r := []rune(v)
	inDouble := true
	for i := 0; i < len(r); i++ {
		switch c := r[i]; {
		case c == '"':
			inDouble = !inDouble
		case c == '\'' && !inDouble:
			for i++; i < len(r); i++ {
				if r[i] == '\\' {
					i++
				} else if r[i] == '\'' {
					break
				}
			}
		case c == '\\':
			i++
		case c == '$':
			i++
			if i < len(r) && r[i] == '{' {
				i++
				if i < len(r) && r[i] == '#' {
					i++
				}
			}
			start := i
			for i < len(r) && (isNameStart(r[i]) || (i > start && unicode.IsDigit(r[i]))) {
				i++
			}
			if i > start {
				if name := string(r[start:i]); !slices.Contains(deps, name) {
					deps = append(deps, name)
				}
			} else if i < len(r) && r[i] == '$' {
				continue // $$, the shell's pid
			}
			// The character that ended the name is looked at again (YARN
			// skips it, and so misses $B in "$A$B").
			i--
		}
	}
	return deps
}

func isNameStart(c rune) bool { return c == '_' || unicode.IsLetter(c) }
