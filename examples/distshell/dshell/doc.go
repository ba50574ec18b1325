// Package dshell is a YARN application written in Go on package client: a
// port of Hadoop's DistributedShell. Its client submits an application
// whose master is the same binary (shipped as a local resource), and the
// master runs a shell command in a number of containers, then finishes the
// application SUCCEEDED if every one exited 0.
//
// RunClient and RunAM are the two roles as functions, so that tests can run
// them in process; Main is the command line of the distshell binary.
package dshell
