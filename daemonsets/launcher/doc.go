// Package launcher is knit-launcher, PID 1 of every YARN container's pod.
// It does for one container what a NodeManager's ContainerLaunch does.
//
// The pod starts before the AM calls startContainers (a pod's spec cannot
// change after creation), so the launcher first waits for the launch files
// knit-node writes once the container's work folder is ready
// (launch.FilesPath, see package rks/launch). It then writes the
// NodeManager's launch_container.sh into the work folder (Script: the
// NodeManager's environment, the application's, expanded as YARN expands
// it, and the commands in one `exec /bin/bash -c`), runs it in a session
// and process group of its own with its output going to the pod's log and,
// as the NodeManager's script sends it, to prelaunch.out and prelaunch.err
// in the log folder, forwards signals to that group (SIGTERM followed by
// SIGKILL after a delay, as the NodeManager stops a container), reaps
// orphans when it is PID 1, and exits with the container's exit code,
// leaving YARN's diagnostics as the termination message when the container
// failed.
//
// # What a NodeManager does at a launch, and where Knit does it
//
// Checked against Hadoop 3.4.1's ContainerLaunch (call, sanitizeEnv,
// expandEnvironment), ContainerExecutor.writeLaunchEnv,
// UnixShellScriptBuilder and DefaultContainerExecutor.launchContainer, with
// LinuxContainerExecutor's container-executor.c where the two executors
// differ:
//
//   - The NodeManager's variables, which the application cannot set:
//     HADOOP_TOKEN_FILE_LOCATION, CONTAINER_ID, NM_PORT, NM_HOST,
//     NM_HTTP_PORT, LOCAL_DIRS, LOCAL_USER_DIRS (with a trailing /),
//     LOG_DIRS, USER, LOGNAME, HOME (yarn.nodemanager.user-home-dir,
//     "/home/"), PWD, LOCALIZATION_COUNTERS, JVM_PID ("$$"), and
//     NM_AUX_SERVICE_<name> (standard base64 of each aux service's
//     metadata, unchunked as commons-codec's encodeBase64String): Script,
//     in that order.
//   - yarn.nodemanager.env-whitelist as `export V=${V:-"node value"}`,
//     before the rest, and only for names neither the application nor the
//     NodeManager set; yarn.nodemanager.admin-env's default
//     MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX forced over the application's;
//     the AM's APP_SUBMIT_TIME_ENV and APPLICATION_WEB_PROXY_BASE: Script.
//     HADOOP_CONF_DIR and JAVA_HOME are whitelisted names (no longer forced
//     as in Hadoop 2), and CLASSPATH is the application's alone on Linux
//     (the classpath jar is Windows only).
//   - <LOG_DIR>, <CPS>, {{ }} and <ADD_OPENS> in every command and every
//     environment value; <ADD_OPENS> becomes AddOpensJDK17 for a JVM of 17
//     or newer, decided from the container's own JVM (AddOpens,
//     EnvAddOpens forces it).
//   - The script: #!/bin/bash, set -o pipefail -e, the exports, the copy of
//     itself and directory.info in the log folder
//     (yarn.nodemanager.log-container-debug-info.enabled, on by default),
//     then exec /bin/bash -c with the commands joined by a space. Its
//     output goes to prelaunch.out and prelaunch.err (the launcher copies
//     it there and to the pod's log). The resource links (`ln -sf`) are
//     knit-node's, made before the launch.
//   - The launch: bash runs launch_container.sh from the work folder in a
//     new session (setsid), so that signals go to its process group;
//     SIGTERM, then SIGKILL after yarn.nodemanager.sleep-delay-before-sigkill.ms.
//   - Folders and files, knit-node's (package localizer): the work folder
//     and its tmp folder (java.io.tmpdir of MapReduce's and Spark's JVMs)
//     0710, the log folders 0710
//     (yarn.nodemanager.default-container-executor.log-dirs.permissions),
//     the token file container_tokens (0600) for every container, empty
//     Credentials when the launch context has no tokens, all owned by the
//     container's user when the pod says who that is.
//
// Left as they are: the umask is the pod's (the DefaultContainerExecutor
// keeps the NodeManager's, normally 022; the LinuxContainerExecutor sets
// 027, which would hide the container's files from node services that do
// not share its group); no .crc files beside the script and token file
// (the NodeManager's local file system writes them; nothing reads them);
// no keystore or truststore variables (only for an RM with
// yarn.resourcemanager.application-https.policy other than NONE); no
// Docker runtime variables; no pid or exit code files (the launcher
// waits for its child, and the kubelet records the exit code).
package launcher
