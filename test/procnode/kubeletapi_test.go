package procnode

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func TestCRILogWriterSplitsLongLinesAndEndsAnUnterminatedOne(t *testing.T) {
	long := strings.Repeat("x", maxLogLine+10)
	var log bytes.Buffer
	w := &criLogWriter{w: &log, now: func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC) }}
	if err := w.copyStream(strings.NewReader("one\n\n"+long+"\nlast"), streamStderr); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	wantTags := []string{"F", "F", "P", "F", "F"}
	if len(lines) != len(wantTags) {
		t.Fatalf("%d records, want %d:\n%s", len(lines), len(wantTags), log.String()[:200])
	}
	for i, l := range lines {
		if want := "2025-01-02T03:04:05.000000006Z stderr " + wantTags[i] + " "; !strings.HasPrefix(l, want) {
			t.Errorf("record %d starts %q, want %q", i, l[:min(len(l), 50)], want)
		}
	}
	if got, want := string(criContent(log.Bytes())), "one\n\n"+long+"\nlast\n"; got != want {
		t.Errorf("content does not round-trip: %d bytes, want %d", len(got), len(want))
	}
}

func TestParseCRIRecordRefusesWhatIsNoRecord(t *testing.T) {
	for _, line := range []string{
		"",
		"2025-01-02T03:04:05Z",
		"not-a-time stdout F x",
		"2025-01-02T03:04:05Z stdin F x",
		"2025-01-02T03:04:05Z stdout X x",
		"2025-01-02T03:04:05Z stdout F",
	} {
		if _, err := parseCRIRecord([]byte(line)); err == nil {
			t.Errorf("parseCRIRecord(%q) took it for a record", line)
		}
	}
	rec, err := parseCRIRecord([]byte("2025-01-02T03:04:05.5Z stdout P:extra a b "))
	if err != nil || !rec.Partial || rec.Stream != streamStdout || string(rec.Content) != "a b " {
		t.Errorf("record with extra tags: %+v, %v", rec, err)
	}
}

func FuzzParseCRIRecord(f *testing.F) {
	f.Add([]byte("2025-01-02T03:04:05.000000006Z stdout F hello"))
	f.Add([]byte("2025-01-02T03:04:05Z stderr P:x "))
	f.Add([]byte("\x00 \x00 \x00"))
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := parseCRIRecord(line)
		if err != nil {
			return
		}
		if rec.Stream != streamStdout && rec.Stream != streamStderr {
			t.Fatalf("stream %q accepted", rec.Stream)
		}
		if !bytes.HasSuffix(line, rec.Content) {
			t.Fatalf("content %q is not the line's end", rec.Content)
		}
		_ = criContent(append(line, '\n'))
	})
}

func TestLogRequestDecodesAndChecksTheKubeletsParameters(t *testing.T) {
	tests := []struct {
		name  string
		query string
		check func(*corev1.PodLogOptions) bool
		bad   bool
	}{
		{name: "no parameters is the whole log", query: "", check: func(o *corev1.PodLogOptions) bool {
			return !o.Follow && o.TailLines == nil && o.LimitBytes == nil && o.Stream == nil
		}},
		{name: "every parameter", query: "follow=true&previous=1&timestamps=true&tailLines=5&limitBytes=9&sinceSeconds=3&stream=Stderr",
			bad: true}, // tailLines with a single stream
		{name: "flags and numbers", query: "follow=true&previous=1&timestamps=true&tailLines=5&limitBytes=9&sinceSeconds=3",
			check: func(o *corev1.PodLogOptions) bool {
				return o.Follow && o.Previous && o.Timestamps && *o.TailLines == 5 && *o.LimitBytes == 9 && *o.SinceSeconds == 3
			}},
		{name: "legacy tail", query: "tail=7", check: func(o *corev1.PodLogOptions) bool { return *o.TailLines == 7 }},
		{name: "tail all is no tail", query: "tail=all", check: func(o *corev1.PodLogOptions) bool { return o.TailLines == nil }},
		{name: "sinceTime", query: "sinceTime=2025-01-02T03:04:05Z", check: func(o *corev1.PodLogOptions) bool {
			return o.SinceTime.Time.Equal(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
		}},
		{name: "a bad boolean", query: "follow=maybe", bad: true},
		{name: "a bad number", query: "tailLines=x", bad: true},
		{name: "a negative tail", query: "tailLines=-1", bad: true},
		{name: "a zero limit", query: "limitBytes=0", bad: true},
		{name: "both since forms", query: "sinceSeconds=1&sinceTime=2025-01-02T03:04:05Z", bad: true},
		{name: "an unknown stream", query: "stream=Stdin", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			opts, err := logRequest(q)
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted: %+v", opts)
				}
				return
			}
			if err != nil || !tc.check(opts) {
				t.Fatalf("logRequest(%q) = %+v, %v", tc.query, opts, err)
			}
		})
	}
}

func FuzzLogRequest(f *testing.F) {
	f.Add("follow=true&tailLines=3&limitBytes=10&sinceTime=2025-01-02T03:04:05Z")
	f.Add("tail=all&stream=Stdout")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		opts, err := logRequest(q)
		if err != nil {
			return
		}
		if opts.TailLines != nil && *opts.TailLines < 0 || opts.LimitBytes != nil && *opts.LimitBytes < 1 {
			t.Fatalf("accepted out-of-range options %+v", opts)
		}
	})
}

// writeTestLog writes records at the given times and returns the file.
func writeTestLog(t *testing.T, records ...string) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(p, []byte(strings.Join(records, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestCopyLogCutsTheOutputAsTheKubeletDoes(t *testing.T) {
	records := []string{
		"2025-01-02T03:00:00Z stdout F first",
		"2025-01-02T03:00:01Z stderr F second",
		"not a record",
		"2025-01-02T03:00:02Z stdout P thi",
		"2025-01-02T03:00:02.5Z stdout F rd",
		"2025-01-02T03:00:03Z stderr F fourth",
	}
	since := time.Date(2025, 1, 2, 3, 0, 2, 0, time.UTC)
	tests := []struct {
		name string
		opts corev1.PodLogOptions
		want string
	}{
		{name: "everything, partial records joined, non-records skipped", want: "first\nsecond\nthird\nfourth\n"},
		{name: "the last two lines of the file", opts: corev1.PodLogOptions{TailLines: ptr.To[int64](2)}, want: "rd\nfourth\n"},
		{name: "no lines", opts: corev1.PodLogOptions{TailLines: ptr.To[int64](0)}, want: ""},
		{name: "more lines than there are", opts: corev1.PodLogOptions{TailLines: ptr.To[int64](50)}, want: "first\nsecond\nthird\nfourth\n"},
		{name: "a byte limit", opts: corev1.PodLogOptions{LimitBytes: ptr.To[int64](8)}, want: "first\nse"},
		{name: "since a time", opts: corev1.PodLogOptions{SinceTime: ptr.To(metav1Time(since))}, want: "third\nfourth\n"},
		{name: "stderr only", opts: corev1.PodLogOptions{Stream: ptr.To(corev1.LogStreamStderr)}, want: "second\nfourth\n"},
		{name: "timestamps on every record", opts: corev1.PodLogOptions{Timestamps: true, TailLines: ptr.To[int64](3)},
			want: "2025-01-02T03:00:02Z thi2025-01-02T03:00:02.5Z rd\n2025-01-02T03:00:03Z fourth\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := writeTestLog(t, records...)
			var out bytes.Buffer
			w := &logWriter{w: &out, flush: func() {}, left: -1}
			if tc.opts.LimitBytes != nil {
				w.left = *tc.opts.LimitBytes
			}
			err := copyLog(context.Background(), f, w, &tc.opts, func() bool { return false })
			if err != nil && err != errLimitReached {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("output %q, want %q", out.String(), tc.want)
			}
		})
	}
}

// testCA makes a CA and issues certificates from it.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return testCA{cert: cert, key: key}
}

func (ca testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage, ips ...net.IP) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{"group-a"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (ca testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func TestKubeletAPIAdmitsOnlyCertificatesOfItsCAWhoseUserIsAuthorized(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	client := fakeClient()
	var reviews []authorizationv1.SubjectAccessReviewSpec
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		reviews = append(reviews, sar.Spec)
		sar.Status.Allowed = sar.Spec.User == "allowed"
		return true, sar, nil
	})
	api := &kubeletAPI{node: "node-1", client: client, log: slog.New(slog.DiscardHandler)}
	l, _, err := listenKubeletAPI("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- api.serve(ctx, l, KubeletTLS{Certificate: ca.issue(t, "node", x509.ExtKeyUsageServerAuth, net.IPv4(127, 0, 0, 1)), ClientCAs: ca.pool()})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	get := func(certs ...tls.Certificate) (int, string, error) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool(), Certificates: certs}}}
		defer c.CloseIdleConnections()
		resp, err := c.Get("https://" + l.Addr().String() + "/healthz")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	tests := []struct {
		name       string
		certs      []tls.Certificate
		code       int
		body       string
		refusedTLS bool
	}{
		{name: "no client certificate is refused in the handshake", refusedTLS: true},
		{name: "a certificate of another CA is refused in the handshake",
			certs: []tls.Certificate{other.issue(t, "allowed", x509.ExtKeyUsageClientAuth)}, refusedTLS: true},
		{name: "a user the API denies is forbidden",
			certs: []tls.Certificate{ca.issue(t, "denied", x509.ExtKeyUsageClientAuth)}, code: http.StatusForbidden,
			body: "Forbidden (user=denied, verb=get, resource=nodes, subresource=healthz)\n"},
		{name: "a user the API allows is answered",
			certs: []tls.Certificate{ca.issue(t, "allowed", x509.ExtKeyUsageClientAuth)}, code: http.StatusOK, body: "ok"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body, err := get(tc.certs...)
			if tc.refusedTLS {
				if err == nil {
					t.Fatalf("answered %d %q", code, body)
				}
				return
			}
			if err != nil || code != tc.code || body != tc.body {
				t.Fatalf("got %d %q, %v; want %d %q", code, body, err, tc.code, tc.body)
			}
		})
	}
	last := reviews[len(reviews)-1]
	if last.ResourceAttributes.Name != "node-1" || last.ResourceAttributes.Subresource != "healthz" ||
		len(last.Groups) != 2 || last.Groups[0] != "group-a" {
		t.Errorf("review %+v, want nodes/healthz of node-1 for the certificate's groups", last)
	}
}

func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t) }
