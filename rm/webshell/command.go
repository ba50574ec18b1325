package webshell

import "github.com/knitdev/knit/rks/launch"

// shellScript puts the exec'd command where the container's own command
// runs: knit-node records the work folder in the pod's launch files
// (launch.FilesPath: <launch dir>/$KNIT_POD_UID/launch.json, one line of
// JSON) and knit-launcher writes the container's environment as the
// export lines of launch_container.sh there. A pod whose launch files are
// not there yet keeps the pod's own folder and environment. Then it runs
// the user's command, or an interactive shell.
const shellScript = `w=$(sed -n 's/.*"workDir":"\([^"]*\)".*/\1/p' "$0/$` + launch.EnvPodUID + `/` + launch.FilesName + `" 2>/dev/null)
if [ -n "$w" ] && cd "$w" 2>/dev/null; then
  if [ -r ` + launchScript + ` ]; then eval "$(grep '^export ' ` + launchScript + `)"; fi
  export PWD="$w"
fi
if [ $# -eq 0 ]; then exec "${SHELL:-/bin/sh}" -i; fi
exec "$@"`

// launchScript is the script knit-launcher writes in the work folder
// (the NodeManager's name for it).
const launchScript = "launch_container.sh"

// ExecCommand is what the shell runs in the container: a POSIX shell that
// enters the container's work folder with its environment, then runs
// command, or an interactive ${SHELL:-/bin/sh} when command is empty.
// launchDir is the launch folder the pod mounts (launch.Dir of the node
// root).
func ExecCommand(launchDir string, command []string) []string {
	return append([]string{"/bin/sh", "-c", shellScript, launchDir}, command...)
}
