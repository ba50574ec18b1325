// Package webshell is the wire format of Knit's web shell: the WebSocket
// the RM serves at /shell/<container id>/ws, spoken by the browser page
// (its script implements the same frames) and by `knit shell`.
//
// A session starts with a WebSocket handshake offering Subprotocol; the
// request's query holds the Start parameters (command, terminal, size) and
// the caller (user.name, as the RM's web pages take it). A refusal is the
// handshake's HTTP answer: a status and a plain-text reason.
//
// After the handshake every WebSocket message is one binary Frame: a type
// byte, then the type's payload.
//
//	client → server   Stdin       bytes typed or piped (at most MaxData)
//	                  Resize      cols uint16, rows uint16, big-endian
//	                  CloseStdin  no payload: the client's input ended
//	server → client   Stdout      bytes (a terminal merges stderr in)
//	                  Stderr      bytes (only without a terminal)
//	                  Exit        code int32 big-endian, then a UTF-8 reason
//
// Exit is the last frame; the server then closes the WebSocket normally.
// Code is the command's exit code, or ExitClosed with the reason when the
// server ended the session (the container ended, access was revoked, the
// session was idle).
//
// Imports: the standard library only. No globals.
package webshell
