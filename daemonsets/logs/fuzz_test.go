package logs

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/knitdev/knit/acl"
)

// FuzzWebParameters sends arbitrary path segments and query values to
// every route: the server must answer (no panic) and never serve a file
// outside the container's log folders.
func FuzzWebParameters(f *testing.F) {
	for _, s := range [][3]string{
		{runningCID, "stdout", "size=-4096"},
		{runningCID, "..", "start=-1&end=-2"},
		{"container_1_1_1_1", "syslog", "size=abc"},
		{runningCID, "stdout", "start=9223372036854775807&end=-9223372036854775808"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	srv, _ := testServer(f, Access{Enabled: true, Admin: acl.Parse("*")})
	f.Fuzz(func(t *testing.T, cid, file, query string) {
		if len(cid)+len(file)+len(query) > 4096 {
			return
		}
		c, fl := url.PathEscape(cid), url.PathEscape(file)
		for _, p := range []string{
			"/ws/v1/node/containers/" + c + "/logs",
			"/ws/v1/node/containers/" + c + "/logs/" + fl,
			"/ws/v1/node/containerlogs/" + c + "/" + fl,
			"/ws/v1/node/apps/" + c,
			"/node/containerlogs/" + c + "/root",
			"/node/containerlogs/" + c + "/root/" + fl + "/",
		} {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.URL.Path, req.URL.RawPath, req.URL.RawQuery = "", "", ""
			u, err := url.Parse(p + "?" + query)
			if err != nil {
				continue
			}
			req.URL = u
			req.RequestURI = u.RequestURI()
			w := httptest.NewRecorder()
			srv.Config.Handler.ServeHTTP(w, req)
			if w.Code == http.StatusOK && strings.Contains(w.Body.String(), "root:x:0:0") {
				t.Fatalf("%s served a file outside the log folders", p)
			}
		}
	})
}
