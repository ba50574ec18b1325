// Package yarnapp is what Knit's example YARN applications (examples/mrjob,
// examples/sparkjob) share as one-binary Go applications: the binary and
// inputs shipped to containers as file:// local resources the nodes check
// (File), a role's spec passed on the launch command line as one
// shell-safe word (EncodeSpec, DecodeSpec, Command), and the client's and
// AM's small chores on package client (WaitForEnd, CapTo, ContainerString).
//
// The launch command runs inside the node's `bash -c "..."`, so only
// numbers, addresses and base64url words go on it.
//
// Imports: stdlib, protobuf, client and protocols.
package yarnapp
