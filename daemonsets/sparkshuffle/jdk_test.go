package sparkshuffle

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJDKSaslClient authenticates the JDK's own DIGEST-MD5 client,
// configured as Spark's SparkSaslClient, against the service over Spark's
// frames: it completes (so our rspauth satisfies the JDK) and the
// connection is then served; a wrong secret gets Spark's failure.
func TestJDKSaslClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts JVMs; skipped with -short")
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		t.Skip("javac not on PATH; install a JDK to run the JDK interop test")
	}
	classes := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, javac, "-d", classes, filepath.Join("testdata", "SparkSaslClient.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	nd := newNode(t, func(cfg *Config) { cfg.Authenticate = true })
	dirs := nd.app(9, "frank", "jdk-secret")
	app := appID(9).String()
	c, err := nd.dial(ClientConfig{AppID: app, Secret: []byte("jdk-secret"), Auth: AuthSASL})
	if err != nil {
		t.Fatal(err)
	}
	register(t, c, app, dirs)
	c.Close()
	host, port, _ := net.SplitHostPort(nd.svc.Addr().String())
	run := func(secret string) string {
		out, err := exec.CommandContext(ctx, "java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classes,
			"SparkSaslClient", host, port, app, secret).CombinedOutput()
		if err != nil {
			t.Fatalf("java: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("jdk-secret"); got != "COMPLETE\nANSWER 4" {
		t.Errorf("JDK client with the secret: %q", got)
	}
	want := "FAIL java.lang.RuntimeException: javax.security.sasl.SaslException: DIGEST-MD5: digest response format violation. Mismatched response."
	if got := run("wrong"); got != want {
		t.Errorf("JDK client with a wrong secret: %q, want %q", got, want)
	}
}
