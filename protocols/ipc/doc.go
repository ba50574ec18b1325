// Package ipc is the Hadoop RPC engine (IPC version 9, protobuf RPC kind):
// a server that answers unchanged Hadoop Java clients and a client that Knit's
// own tools, tests and examples use.
//
// The server owns connections: the preamble, SASL (SIMPLE and TOKEN over
// DIGEST-MD5), the connection context, framing, call multiplexing, pings, idle
// timeouts and shutdown. Handlers own meaning: they are typed functions
// registered by (protocol name, method name) that see the caller's identity
// in their context and return either a response or an error naming the Java
// exception class a Hadoop client expects.
//
// The byte-level rules come from Hadoop's Server.java, Client.java and
// ProtobufRpcEngine2.java; see docs/hadoop-wire-facts.md §1–§2 and §9.
package ipc
