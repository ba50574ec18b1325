package ipc

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
)

// workerIdle is how long a call's goroutine waits for the next call of
// any connection before it ends: under load calls come microseconds
// apart, and an idle server soon has no goroutine left for its calls.
const workerIdle = 250 * time.Millisecond

// serverCall is one call from its frame to its answer. The server pools
// them, so that handing a call to a worker and heading its answer cost
// no allocations of their own: with a large heap (an RM holding 100,000
// pods) every byte a call allocates comes back as marking work.
type serverCall struct {
	c        *conn
	reply    callReply
	protocol string
	m        Method
	req      proto.Message
	encoded  []byte
	received time.Time

	// hdr heads a successful answer; its fields point at the values below.
	hdr            commonpb.RpcResponseHeaderProto
	wireID         uint32
	status         commonpb.RpcResponseHeaderProto_RpcStatusProto
	version        uint32
	retry          int32
	clientIDOrNone []byte
}

// callPool recycles serverCalls; a Server owns one.
type callPool struct{ p sync.Pool }

func (cp *callPool) get() *serverCall {
	if sc, ok := cp.p.Get().(*serverCall); ok {
		return sc
	}
	return new(serverCall)
}

// put takes sc back once its answer is written: nothing of the call may
// hold it then (its handler's context is not part of it).
func (cp *callPool) put(sc *serverCall) {
	sc.c, sc.req, sc.encoded, sc.m = nil, nil, nil, Method{}
	sc.reply, sc.protocol, sc.clientIDOrNone = callReply{}, "", nil
	sc.hdr.Reset()
	cp.p.Put(sc)
}

// successHeader is the header of sc's answer when its handler succeeded,
// as runCall sends it.
func (sc *serverCall) successHeader() *commonpb.RpcResponseHeaderProto {
	sc.wireID, sc.status, sc.version, sc.retry = uint32(sc.reply.id), commonpb.RpcResponseHeaderProto_SUCCESS, currentVersion, sc.reply.retry
	sc.clientIDOrNone = nonNil(sc.reply.clientID)
	sc.hdr.Reset()
	sc.hdr.CallId, sc.hdr.Status, sc.hdr.ServerIpcVersionNum = &sc.wireID, &sc.status, &sc.version
	sc.hdr.ClientId, sc.hdr.RetryCount = sc.clientIDOrNone, &sc.retry
	return &sc.hdr
}

// callContext is a call's context: its connection's, and the call's
// Caller under callerKey, in one allocation rather than a copy of the
// Caller and a context.WithValue around it.
type callContext struct {
	context.Context
	caller Caller
}

// withCallCaller returns parent carrying caller, with reply's call id,
// retry count and client id.
func withCallCaller(parent context.Context, caller *Caller, reply callReply) context.Context {
	cc := &callContext{Context: parent, caller: *caller}
	cc.caller.CallID, cc.caller.RetryCount, cc.caller.ClientID = reply.id, reply.retry, reply.clientID
	return cc
}

func (cc *callContext) Value(key any) any {
	if _, ok := key.(callerKey); ok {
		return &cc.caller
	}
	return cc.Context.Value(key)
}

// dispatch runs call on one of the server's goroutines: an idle one that
// ran an earlier call, or a new one. A goroutine started for each call
// begins with the smallest stack and grows it by copying, several times
// a call for a handler that calls on (a third of the Router's CPU per
// forwarded submission in profiles); a reused one has grown it once.
func (s *Server) dispatch(call *serverCall) {
	select {
	case s.work <- call:
		return
	default:
	}
	s.workers.Add(1)
	go s.worker(call)
}

// worker runs call, then the calls dispatch hands it, until it has idled
// for workerIdle or the server closes. Shutdown waits for the workers.
func (s *Server) worker(call *serverCall) {
	defer s.workers.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		call.c.runCall(call)
		s.calls.put(call)
		idle.Reset(workerIdle)
		select {
		case call = <-s.work:
		case <-idle.C:
			return
		case <-s.done:
			return
		}
	}
}
