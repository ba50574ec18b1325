// Package dshell is a YARN application written in Go on package client: a
// port of Hadoop's DistributedShell. Its client submits an application
// whose master is the same binary (shipped as a local resource), and the
// master runs a shell command (or script) in a number of containers, then
// finishes the application SUCCEEDED if every one exited 0.
//
// As in DistributedShell, the client stages the shell command and
// arguments as files (shellCommands and shellArgs, in Java's writeUTF
// form) and a -shell_script as ExecScript.sh, in
// <home>/<appName>/<application id>, ships the files to the AM as local
// resources and the script's location in the AM's environment, and
// removes the folder once the application has ended. Only numbers, the
// environment and addresses go on the AM's command line, which the
// node's launch script runs inside `bash -c "..."`.
//
// RunClient and RunAM are the two roles as functions, so that tests can run
// them in process; Main is the command line of the distshell binary.
package dshell
