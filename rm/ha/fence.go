package ha

import (
	"fmt"
	"net/http"
)

// FenceTransport returns a wrapper for rest.Config.WrapTransport that sends
// a mutating request (POST, PUT, PATCH, DELETE) only while fence returns
// nil; otherwise the request fails with fence's error, unsent. Reads pass.
// It covers every write a client makes (pods, secrets, events, the state
// store) without each caller knowing of leadership; the Lease's own client
// must not be wrapped.
func FenceTransport(fence func() error) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return fencedTransport{next: rt, fence: fence}
	}
}

type fencedTransport struct {
	next  http.RoundTripper
	fence func() error
}

func (t fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.next.RoundTrip(req)
	}
	if err := t.fence(); err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // RoundTrip owns the body, even unsent
		}
		return nil, fmt.Errorf("%s %s refused: %w", req.Method, req.URL.Path, err)
	}
	return t.next.RoundTrip(req)
}
