package rm

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/rest"
	"github.com/knitdev/knit/rm/webproxy"
	"github.com/knitdev/knit/rm/webui"
)

// injected is an application name and diagnostics meant to run script;
// rendered, they must stay text.
const injected = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2"><b id=injected>bold</b>`

// browser starts Debian's chromium headless for t; without chromium the
// test is skipped, unless CI is set.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is required under CI=true: %v", err)
		}
		t.Skip("chromium is not installed (apt-get install -y chromium); the web UI's browser test needs it and runs under CI=true")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1500, 640),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc() // waits for the browser to exit
	})
	// The first call starts the browser, on a context without a deadline.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// run runs a browser action for t.
func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// TestWebUIInABrowser drives the RM's pages in a real headless chromium:
// they render, every local link resolves, a killed application shows
// KILLED, the tracking URL a client gets leads to the application, and an
// application named with markup shows it as text, running nothing.
func TestWebUIInABrowser(t *testing.T) {
	ctx := browser(t)
	e := newEnv(t, envOptions{})
	alice := e.client("alice")
	evil := e.mustSubmit(alice, subOpts{name: injected})
	killed := e.mustSubmit(alice, subOpts{name: "to be killed"})
	kill := &yarnpb.KillApplicationRequestProto{ApplicationId: killed, Diagnostics: proto.String(injected)}
	for range 2 { // the second answers once the kill is stored
		mustCall(t, alice, "forceKillApplication", kill, &yarnpb.KillApplicationResponseProto{})
	}
	evilID, killedID := appIDOf(t, evil).String(), appIDOf(t, killed).String()
	tracking := e.report(alice, evil).GetTrackingUrl()

	ech := rest.New(rest.Config{Cluster: e.rm.REST(), Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(ech)
	defer srv.Close()
	p, err := webproxy.New(webproxy.Config{Apps: e.rm.WebProxy(), RMWebURL: srv.URL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Register(ech)
	ui, err := webui.New(webui.Config{Cluster: e.rm.WebUI(nil), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ui.Register(ech)

	// The overview, reached from /.
	do(t, ctx, chromedp.Navigate(srv.URL+"/?user.name=alice"), chromedp.WaitVisible(chromedp.ID("apps")))
	title := run(t, ctx, chromedp.Title())
	location := run(t, ctx, chromedp.Location())
	links := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('a[href^="/"]')).map(a => a.getAttribute('href'))`))
	pwned := run(t, ctx, chromedp.Evaluate[int](`window.pwned === undefined ? 0 : window.pwned`))
	scripts := run(t, ctx, chromedp.Evaluate[int](`document.scripts.length`))
	injectedEls := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('#injected').length`))
	names := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#apps td.name')).map(td => td.textContent)`))
	if title != "All Applications" || !strings.HasSuffix(location, "/cluster?user.name=alice") {
		t.Errorf("/ led to %q titled %q", location, title)
	}
	if pwned != 0 || scripts != 0 || injectedEls != 0 {
		t.Errorf("injected markup is live: pwned=%d scripts=%d elements=%d", pwned, scripts, injectedEls)
	}
	if !slices.Contains(names, injected) {
		t.Errorf("the application's name is not shown as text: %q", names)
	}

	// Every local link of the overview answers, in the browser's session.
	seen := map[string]bool{}
	for _, l := range links {
		if seen[l] || strings.HasPrefix(l, "/metrics") {
			continue
		}
		seen[l] = true
		resp, err := http.Get(srv.URL + l)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("link %s: %d", l, resp.StatusCode)
		}
	}
	for _, want := range []string{"/cluster/app/" + evilID + "?user.name=alice", "/cluster/nodes?user.name=alice", "/cluster/scheduler?user.name=alice"} {
		if !seen[want] {
			t.Errorf("the overview has no link %s (links: %v)", want, links)
		}
	}

	// The killed application, through its link on the overview.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`a[href="/cluster/app/`+killedID+`?user.name=alice"]`)),
		chromedp.WaitVisible(chromedp.ID("app-state")))
	state := run(t, ctx, chromedp.Text(chromedp.ID("app-state")))
	diag := run(t, ctx, chromedp.Text(chromedp.ID("diagnostics")))
	pwned = run(t, ctx, chromedp.Evaluate[int](`window.pwned === undefined ? 0 : window.pwned`))
	injectedEls = run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('#injected').length`))
	if state != "KILLED" {
		t.Errorf("the killed application shows %q", state)
	}
	if !strings.Contains(diag, "window.pwned=1") || pwned != 0 || injectedEls != 0 {
		t.Errorf("diagnostics %q ran or became markup (pwned=%d elements=%d)", diag, pwned, injectedEls)
	}

	// The tracking URL a client prints leads to the application's page.
	u, err := url.Parse(tracking)
	if err != nil || u.Path == "" {
		t.Fatalf("tracking URL %q", tracking)
	}
	do(t, ctx, chromedp.Navigate(srv.URL+u.RequestURI()), chromedp.WaitVisible(chromedp.ID("app-name")))
	location = run(t, ctx, chromedp.Location())
	name := run(t, ctx, chromedp.Text(chromedp.ID("app-name")))
	if !strings.Contains(location, "/cluster/app/"+evilID) || !strings.Contains(name, "window.pwned") {
		t.Errorf("tracking URL %s led to %s showing %q", tracking, location, name)
	}

	// Nodes and queues render.
	do(t, ctx, chromedp.Navigate(srv.URL+"/cluster/nodes"))
	kube := run(t, ctx, chromedp.Text(chromedp.CSS("#nodes td.kubenode")))
	do(t, ctx, chromedp.Navigate(srv.URL+"/cluster/scheduler"))
	queue := run(t, ctx, chromedp.Text(chromedp.ID("queues")))
	if kube != "n1" || !strings.Contains(queue, "default") {
		t.Errorf("nodes page shows %q, queues %q", kube, queue)
	}

	// KNIT_WEBUI_SCREENSHOT=docs/webui.png keeps a picture of the overview.
	if out := os.Getenv("KNIT_WEBUI_SCREENSHOT"); out != "" {
		do(t, ctx, chromedp.Navigate(srv.URL+"/cluster?user.name=alice"), chromedp.WaitVisible(chromedp.ID("apps")))
		png := run(t, ctx, chromedp.CaptureScreenshot())
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
