// Package protocols holds Knit's wire formats and nothing else: the Hadoop
// common and YARN protobuf definitions (commonpb, yarnpb), the Writable
// encodings (writable, token), the DIGEST-MD5 mechanism (digestmd5) and the
// Hadoop RPC engine (ipc). No YARN semantics live here.
package protocols
