package localizer

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
)

// fakeProxy swaps any AMRMToken for a token named "local".
type fakeProxy struct {
	mu            sync.Mutex
	taken         []yarnid.AttemptID
	ended         []yarnid.ApplicationID
	endedAttempts []yarnid.AttemptID
	err           error
}

func (p *fakeProxy) TakeAMRMToken(_ context.Context, attempt yarnid.AttemptID, _ string, creds *token.Credentials) (bool, error) {
	if p.err != nil {
		return false, p.err
	}
	var aliases []string
	for alias := range creds.TokensOfKind("YARN_AM_RM_TOKEN") {
		aliases = append(aliases, alias)
	}
	for _, a := range aliases {
		creds.AddToken(a, token.Token{Identifier: []byte("local"), Password: []byte("pw"), Kind: "YARN_AM_RM_TOKEN"})
	}
	if len(aliases) > 0 {
		p.taken = append(p.taken, attempt)
	}
	return len(aliases) > 0, nil
}

func (p *fakeProxy) EndApplication(_ context.Context, app yarnid.ApplicationID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = append(p.ended, app)
}

func (p *fakeProxy) EndAttempt(attempt yarnid.AttemptID) {
	p.endedAttempts = append(p.endedAttempts, attempt)
}

func amCredentials(t *testing.T) []byte {
	t.Helper()
	var c token.Credentials
	c.AddToken("", token.Token{Identifier: []byte("real"), Password: []byte("pw-real"), Kind: "YARN_AM_RM_TOKEN"})
	c.AddToken("hdfs", token.Token{Identifier: []byte("dt"), Password: []byte("pw-dt"), Kind: "HDFS_DELEGATION_TOKEN"})
	b, err := c.Marshal(token.FormatWritable)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPrepareWithTheAMRMProxy(t *testing.T) {
	const amConf = "/node/amrmproxy/conf"
	tests := []struct {
		name      string
		proxy     bool
		am        bool // the RM's AM container (submit time set)
		proxyErr  error
		wantToken string // identifier of the AMRMToken in the token file
		wantConf  bool   // HADOOP_CONF_DIR is the proxy's
		wantFail  bool
	}{
		{"an AM container gets the proxy's token and configuration", true, true, nil, "local", true, false},
		{"a task container keeps its credentials", true, false, nil, "real", false, false},
		{"with the proxy off an AM keeps the real token", false, true, nil, "real", false, false},
		{"a proxy that refuses the token fails the container", true, true, errors.New("no"), "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakeProxy{err: tt.proxyErr}
			e := newEnv(t, func(c *Config) {
				c.Whitelist = []launch.EnvVar{{Name: "HADOOP_CONF_DIR", Value: "/node/conf"}}
				if tt.proxy {
					c.AMRMProxy, c.AMConfDir = p, amConf
				}
			})
			lc := launchContext(t, 1, nil, nil, nil)
			if tt.am {
				lc.AppSubmitTime = 1700000000000
			}
			f, err := e.l.Prepare(context.Background(), lc, amCredentials(t))
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantFail {
				if f.Failure == "" {
					t.Fatal("the container did not fail")
				}
				return
			}
			b, err := os.ReadFile(f.TokenFile)
			if err != nil {
				t.Fatal(err)
			}
			creds, err := token.ParseCredentials(b)
			if err != nil {
				t.Fatal(err)
			}
			am, _ := creds.Token("")
			if string(am.Identifier) != tt.wantToken {
				t.Fatalf("AMRMToken %q in the token file, want %q", am.Identifier, tt.wantToken)
			}
			if dt, _ := creds.Token("hdfs"); string(dt.Identifier) != "dt" {
				t.Fatalf("other token %q, want it kept", dt.Identifier)
			}
			if got := f.Whitelist[0].Value == amConf; got != tt.wantConf {
				t.Fatalf("HADOOP_CONF_DIR %q, want the proxy's: %v", f.Whitelist[0].Value, tt.wantConf)
			}
		})
	}
}

func TestAnApplicationsEndInTheRMEndsItsAMRMProxyPipelines(t *testing.T) {
	pod, secret := startedPod(t)
	client := fake.NewClientset(pod, secret)
	meta := newMetadataClient(applicationObject("RUNNING"))
	prep, p := &fakePreparer{}, &fakeProxy{}
	runControllerIn(t, t.TempDir(), client, meta, prep, &fakeServices{}, func(c *ControllerConfig) { c.AMRMProxy = p })
	waitFor(t, "the container prepared", func() bool { n, _ := prep.snapshot(); return n == 1 })
	obj := applicationObject("KILLED")
	if _, err := meta.Resource(yarnApplications()).Namespace(rmNamespace).(metadatafake.MetadataClient).UpdateFake(obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pipelines ended", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.ended) == 1 && p.ended[0].String() == testApp
	})
}

func TestReleaseOfAnAMContainerEndsItsAttemptsPipeline(t *testing.T) {
	tests := []struct {
		name      string
		container string
		want      int
	}{
		{"the AM container", testContainer(1), 1},
		{"a task container", testContainer(2), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakeProxy{}
			e := newEnv(t, func(c *Config) { c.AMRMProxy = p })
			e.l.Release(tt.container)
			if len(p.endedAttempts) != tt.want {
				t.Fatalf("ended attempts %v, want %d", p.endedAttempts, tt.want)
			}
		})
	}
}
