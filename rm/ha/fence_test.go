package ha

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestFenceTransportSendsWritesOnlyWhileTheFenceHolds(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = append(got, r.Method) }))
	defer srv.Close()
	var fenceErr error
	c := &http.Client{Transport: FenceTransport(func() error { return fenceErr })(http.DefaultTransport)}

	do := func(method string) error {
		req, _ := http.NewRequest(method, srv.URL+"/api/v1/namespaces/knit/pods", strings.NewReader("{}"))
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if err := do(m); err != nil {
			t.Errorf("%s while leading: %v", m, err)
		}
	}
	fenceErr = ErrNotLeader
	got = nil
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if err := do(m); !errors.Is(err, ErrNotLeader) {
			t.Errorf("%s once deposed: %v, want ErrNotLeader", m, err)
		}
	}
	if err := do(http.MethodGet); err != nil {
		t.Errorf("GET once deposed: %v", err)
	}
	if len(got) != 1 || got[0] != http.MethodGet {
		t.Errorf("server saw %v once deposed, want only the GET", got)
	}
}
