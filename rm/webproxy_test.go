package rm

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/webproxy"
)

// TestWebProxyReachesTheTrackingURLTheAMRegistered: the proxy on the RM's
// applications follows what the AM registered and unregistered, and the
// view ACL.
func TestWebProxyReachesTheTrackingURLTheAMRegistered(t *testing.T) {
	am := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Cookie(webproxy.ProxyUserCookie)
		_, _ = io.WriteString(w, "AM page "+r.URL.Path+" for "+c.Value)
	}))
	defer am.Close()
	e := newEnv(t, envOptions{aclEnable: true})
	attempt, ctx := unmanagedAM(t, e, strings.TrimPrefix(am.URL, "http://"))
	id := attempt.App.String()

	p, err := webproxy.New(webproxy.Config{Apps: e.rm.WebProxy(), RMWebURL: "http://rm.example:8088", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ech := echo.New()
	p.Register(ech)
	srv := httptest.NewServer(ech)
	defer srv.Close()
	get := func(path string) (int, string, string) {
		t.Helper()
		cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		defer cl.CloseIdleConnections()
		resp, err := cl.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(b)
	}

	// An AM that registered no tracking URL: the RM's application page.
	other, _ := unmanagedAM(t, e)
	if code, loc, _ := get("/proxy/" + other.App.String() + "/?user.name=alice"); code != http.StatusFound || loc != "http://rm.example:8088/cluster/app/"+other.App.String() {
		t.Errorf("no tracking URL: %d %q", code, loc)
	}
	if code, _, body := get("/proxy/" + id + "/jobs?user.name=alice"); code != http.StatusOK || body != "AM page /jobs for alice" {
		t.Errorf("owner: %d %q", code, body)
	}
	if code, _, body := get("/proxy/" + id + "/?user.name=mallory"); code != http.StatusForbidden {
		t.Errorf("user without VIEW_APP: %d %q", code, body)
	}
	if code, _, _ := get("/proxy/application_1_0001/"); code != http.StatusNotFound {
		t.Errorf("unknown application: %d", code)
	}
	if _, err := e.rm.FinishApplicationMaster(ctx, &yarnpb.FinishApplicationMasterRequestProto{
		FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED.Enum(), TrackingUrl: proto.String("http://history.example:19888/job/1"),
	}); err != nil {
		t.Fatal(err)
	}
	if code, loc, _ := get("/proxy/" + id + "/conf?user.name=alice"); code != http.StatusFound || loc != "http://history.example:19888/job/1/conf?user.name=alice" {
		t.Errorf("after finishing: %d %q, want a redirect to the final tracking URL", code, loc)
	}
}
