package integration

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rm/webproxy"
	"github.com/knitdev/knit/test/eventually"
)

// webGet asks url from the local address from (nil: the system's choice)
// and follows no redirect.
func webGet(t *testing.T, url string, from net.IP) (*http.Response, string) {
	t.Helper()
	d := &net.Dialer{Timeout: 10 * time.Second}
	if from != nil {
		d.LocalAddr = &net.TCPAddr{IP: from}
	}
	tr := &http.Transport{DialContext: d.DialContext}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestTheProxyReachesAnAMBehindItsFilter: an AM that registers a tracking
// URL and guards it with AmIpFilter, set up as AmFilterInitializer sets it
// up from the yarn-site.xml knit-rm wrote, is reached through knit-rm's
// /proxy/ with the web user; a direct visitor is sent to the proxy, which
// then serves it; once the AM unregisters, the proxy redirects to its final
// tracking URL.
func TestTheProxyReachesAnAMBehindItsFilter(t *testing.T) {
	rm := knitRM(t)
	var newApp yarnpb.GetNewApplicationResponseProto
	if err := rm.call("alice", "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &newApp); err != nil {
		t.Fatal(err)
	}
	appID, err := yarnid.ApplicationIDFromProto(newApp.GetApplicationId())
	if err != nil {
		t.Fatal(err)
	}
	if err := rm.call("alice", "submitApplication", &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId: newApp.ApplicationId, ApplicationName: proto.String("proxied-am"), Queue: proto.String("default"),
		UnmanagedAm: proto.Bool(true), AmContainerSpec: &yarnpb.ContainerLaunchContextProto{},
		Resource: &yarnpb.ResourceProto{Memory: proto.Int64(128), VirtualCores: proto.Int32(1)},
	}}, &yarnpb.SubmitApplicationResponseProto{}); err != nil {
		t.Fatal(err)
	}
	var report *yarnpb.ApplicationReportProto
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(context.Context) error {
		var r yarnpb.GetApplicationReportResponseProto
		if err := rm.call("alice", "getApplicationReport", &yarnpb.GetApplicationReportRequestProto{ApplicationId: newApp.ApplicationId}, &r); err != nil {
			t.Fatal(err)
		}
		if r.GetApplicationReport().GetAmRmToken() == nil {
			return errors.New("no AMRMToken in the report yet")
		}
		report = r.GetApplicationReport()
		return nil
	})

	// The AM's web app, behind the filter an MR or Spark AM would build:
	// the proxy is the RM web address, resolved as WebAppUtils resolves it.
	proxyAddr := webproxy.ResolvedAddress(rm.addrs.Web)
	filter := webproxy.NewAMFilter(proxyAddr, webproxy.Base(appID), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := webproxy.ProxyUser(r)
		_, _ = io.WriteString(w, "AM page "+r.URL.Path+" for "+u)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	amSrv := &http.Server{Handler: filter, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- amSrv.Serve(l) }()
	t.Cleanup(func() {
		_ = amSrv.Close()
		<-served
	})

	am, err := ipc.NewClient(rm.addrs.Scheduler, ipc.ClientConfig{Protocol: yarnrpc.ApplicationMasterProtocolName, Token: report.GetAmRmToken()})
	if err != nil {
		t.Fatal(err)
	}
	defer am.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := am.Call(ctx, "registerApplicationMaster", &yarnpb.RegisterApplicationMasterRequestProto{
		Host: proto.String("127.0.0.1"), RpcPort: proto.Int32(-1), TrackingUrl: proto.String(l.Addr().String()),
	}, &yarnpb.RegisterApplicationMasterResponseProto{}); err != nil {
		t.Fatal(err)
	}

	web := "http://" + rm.addrs.Web
	resp, body := webGet(t, web+webproxy.Base(appID)+"/ws/info?user.name=alice", nil)
	if resp.StatusCode != http.StatusOK || body != "AM page /ws/info for alice" {
		t.Fatalf("through the proxy: %d %q", resp.StatusCode, body)
	}
	// The shared RM checks ACLs: the anonymous web user may not view
	// alice's application.
	if resp, _ := webGet(t, web+webproxy.Base(appID)+"/ws/info", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("anonymous: %d, want 403", resp.StatusCode)
	}
	// A visitor from 127.0.0.2, not the proxy host, is sent to the proxy.
	from := net.ParseIP("127.0.0.2")
	resp, _ = webGet(t, "http://"+l.Addr().String()+"/ws/info?user.name=alice", from)
	loc := resp.Header.Get("Location")
	if want := "http://" + proxyAddr + "/proxy/redirect/" + appID.String() + "/ws/info?user.name=alice"; resp.StatusCode != http.StatusFound || loc != want {
		t.Fatalf("direct visit: %d Location %q, want %s", resp.StatusCode, loc, want)
	}
	_, path, _ := strings.Cut(strings.TrimPrefix(loc, "http://"), "/")
	resp, body = webGet(t, web+"/"+path, from)
	if resp.StatusCode != http.StatusOK || body != "AM page /ws/info for alice" {
		t.Errorf("the redirect followed: %d %q", resp.StatusCode, body)
	}

	final := "http://history.example:19888/jobhistory/job/1"
	if err := am.Call(ctx, "finishApplicationMaster", &yarnpb.FinishApplicationMasterRequestProto{
		FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED.Enum(), TrackingUrl: proto.String(final),
	}, &yarnpb.FinishApplicationMasterResponseProto{}); err != nil {
		t.Fatal(err)
	}
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(context.Context) error {
		resp, _ := webGet(t, web+webproxy.Base(appID)+"/conf?user.name=alice", nil)
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != final+"/conf?user.name=alice" {
			return errors.New("no redirect to the final tracking URL yet: " + resp.Status + " " + resp.Header.Get("Location"))
		}
		return nil
	})
}
