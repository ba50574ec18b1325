package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wire "github.com/knitdev/knit/protocols/webshell"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/webshell"
	"github.com/knitdev/knit/test/eventually"
)

// shellBrowser starts Debian's chromium headless for t, as the web UI's
// browser test does; without chromium the test is skipped, unless CI is
// set.
func shellBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is required under CI=true: %v", err)
		}
		t.Skip("chromium is not installed (apt-get install -y chromium)")
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 700))
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// TestWebShellInABrowser: on the local cluster, the owner of a running
// application opens its container's shell from the application page in a
// browser, types into xterm.js and sees the container's id and work
// folder; a user without the ACL is refused; the session is audited in
// the RM's log and as Events on the pod.
func TestWebShellInABrowser(t *testing.T) {
	dumpOnFailure(t)
	rm := knitRM(t)
	rmc, app := submitShellAM(t, "sleep 600", 1, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = rmc.KillApplication(ctx, app, "the web shell test is over")
	})
	appID, err := yarnid.ApplicationIDFromProto(app)
	if err != nil {
		t.Fatal(err)
	}
	var cid yarnid.ContainerID
	eventually.WithinEvery(t, 3*time.Minute, time.Second, func(ctx context.Context) error {
		attempts, err := rmc.GetApplicationAttempts(ctx, app)
		if err != nil || len(attempts) == 0 {
			return fmt.Errorf("attempts: %v", err)
		}
		cs, err := rmc.GetContainers(ctx, attempts[0].GetApplicationAttemptId())
		if err != nil || len(cs) == 0 || cs[0].GetContainerState() != yarnpb.ContainerStateProto_C_RUNNING {
			return fmt.Errorf("containers: %v %v", cs, err)
		}
		cid, err = yarnid.ContainerIDFromProto(cs[0].GetContainerId())
		return err
	})
	web := "http://" + rm.addrs.Web
	ctx := shellBrowser(t)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	// The application page links the running container to its shell once
	// its launch has run (the pod's process is up).
	link := wire.PagePath(cid.String()) + "?user.name=dsuser"
	eventually.WithinEvery(t, 2*time.Minute, time.Second, func(context.Context) error {
		if err := chromedp.Do(ctx, chromedp.Navigate(web+"/cluster/app/"+appID.String()+"?user.name=dsuser"),
			chromedp.WaitVisible(chromedp.ID("containers"))); err != nil {
			return err
		}
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll('a.shell[href=%q]').length`, link)))
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("no shell link %s on the application page", link)
		}
		return nil
	})
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("a.shell")), chromedp.WaitVisible(chromedp.ID("terminal"))); err != nil {
		t.Fatal(err)
	}
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(context.Context) error {
		status, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.ID("status")))
		if err != nil {
			return err
		}
		if status != "connected" {
			return fmt.Errorf("status %q", status)
		}
		return nil
	})
	// The line goes in as typed text (Input.insertText: the textarea's
	// input event, which xterm.js sends once), then the Enter key.
	typeLine := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: "echo $CONTAINER_ID; pwd"})
		return err
	})
	if err := chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(".xterm-helper-textarea")), typeLine, chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatal(err)
	}
	workDir := filepath.Join("usercache", "dsuser", "appcache", appID.String(), cid.String())
	var screen string
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(context.Context) error {
		var err error
		if screen, err = chromedp.Run(ctx, chromedp.Evaluate[string](`window.knitShell.text()`)); err != nil {
			return err
		}
		var sawID, sawDir bool
		for _, line := range strings.Split(screen, "\n") {
			line = strings.TrimSpace(line)
			// The prompt may come before the output on the same line.
			sawID = sawID || (strings.HasSuffix(line, cid.String()) && !strings.Contains(line, "echo"))
			sawDir = sawDir || (strings.Contains(line, "/") && strings.HasSuffix(line, "/"+workDir))
		}
		if !sawID || !sawDir {
			return fmt.Errorf("no line %s and no line ending in /%s on the screen:\n%s", cid, workDir, screen)
		}
		return nil
	})
	// The shell's exit ends the session, and the page says so.
	exitLine := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: "exit 3"})
		return err
	})
	if err := chromedp.Do(ctx, exitLine, chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatal(err)
	}
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(context.Context) error {
		status, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.ID("status")))
		if err != nil {
			return err
		}
		if status != "exited 3" {
			return fmt.Errorf("status %q", status)
		}
		return nil
	})

	// A user without MODIFY_APP is refused, by the page and the socket.
	if err := chromedp.Do(ctx, chromedp.Navigate(web+wire.PagePath(cid.String())+"?user.name=mallory")); err != nil {
		t.Fatal(err)
	}
	refused, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("refused")))
	if err != nil {
		t.Fatal(err)
	}
	if want := "User mallory may not open a shell into container " + cid.String(); !strings.Contains(refused, want) {
		t.Fatalf("mallory's page says %q, want %q", refused, want)
	}

	// The audit: two Events on the pod, and the RM's log record.
	pods, err := cluster.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: launch.LabelContainer + "=" + cid.String()})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the container's pod: %v %v", pods, err)
	}
	pod := pods.Items[0]
	eventually.WithinEvery(t, time.Minute, time.Second, func(ctx context.Context) error {
		evs, err := cluster.Client.EventsV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		seen := map[string]string{}
		var all []string
		for _, e := range evs.Items {
			all = append(all, e.Regarding.Kind+"/"+e.Regarding.Name+" "+e.Reason)
			if e.Regarding.Kind == "Pod" && e.Regarding.Name == pod.Name && e.Regarding.UID == pod.UID {
				seen[e.Reason] = e.Note
			}
		}
		if !strings.Contains(seen[webshell.ReasonOpened], "User dsuser opened an interactive shell into container "+cid.String()) ||
			!strings.Contains(seen[webshell.ReasonClosed], "User dsuser closed an interactive shell into container "+cid.String()) ||
			!strings.Contains(seen[webshell.ReasonClosed], "(exit code 3)") {
			return fmt.Errorf("events on pod %s/%s: %v; in its namespace: %v", pod.Namespace, pod.Name, seen, all)
		}
		return nil
	})
	eventually.WithinEvery(t, time.Minute, time.Second, func(context.Context) error {
		logs, _ := filepath.Glob(filepath.Join(cluster.ControlPlane.Dir, "logs", "knit-rm*.log"))
		for _, p := range logs {
			b, _ := os.ReadFile(p)
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "web shell closed") && strings.Contains(line, "user=dsuser") && strings.Contains(line, cid.String()) &&
					strings.Contains(line, "bytes_in=") && strings.Contains(line, "bytes_out=") && strings.Contains(line, "exit_code=3") {
					return nil
				}
			}
		}
		return fmt.Errorf("no audit record of the session in %v", logs)
	})
}
