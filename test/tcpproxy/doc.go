// Package tcpproxy puts a TCP hop between clients and a server, for tests
// and benchmarks: a plain relay that reads what arrives and writes it on
// (what a hop costs before a proxy does any work of its own), an outage
// (the address refuses connections and the open ones are cut, as a dying
// server's are) and a partition (the open connections are cut and new ones
// hang unanswered until healed). TLS passes through untouched.
//
// Package tcpproxy imports only the standard library; its tests wait with
// package eventually.
package tcpproxy
