package localizer

import (
	"context"
	"slices"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
)

// orderedLogs records the application ends it hears of, and what the
// preparer had cleaned by then.
type orderedLogs struct {
	mu          sync.Mutex
	prep        *fakePreparer
	ended       []string
	cleanedThen [][]string
}

func (o *orderedLogs) ApplicationEnded(_ context.Context, app string) error {
	_, cleaned := o.prep.snapshot()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = append(o.ended, app)
	o.cleanedThen = append(o.cleanedThen, cleaned)
	return nil
}

func (o *orderedLogs) snapshot() ([]string, [][]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ended), slices.Clone(o.cleanedThen)
}

func TestAnEndedApplicationsLogsAreHandedOnBeforeItsFoldersGo(t *testing.T) {
	pod, secret := startedPod(t)
	client := fake.NewClientset(pod, secret)
	meta := newMetadataClient(applicationObject("RUNNING"))
	prep := &fakePreparer{}
	logs := &orderedLogs{prep: prep}
	c, err := NewController(ControllerConfig{
		Client: client, Metadata: meta, ApplicationsNamespace: rmNamespace, Services: &fakeServices{}, Logs: logs,
		NodeName: "node-1", LaunchDir: t.TempDir(), Preparer: prep,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the container prepared", func() bool { n, _ := prep.snapshot(); return n == 1 })

	obj := applicationObject("FINISHED")
	if _, err := meta.Resource(yarnApplications()).Namespace(rmNamespace).(metadatafake.MetadataClient).UpdateFake(obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the application cleaned", func() bool { _, cleaned := prep.snapshot(); return len(cleaned) == 1 })
	ended, cleanedThen := logs.snapshot()
	if len(ended) != 1 || ended[0] != testApp || len(cleanedThen[0]) != 0 {
		t.Errorf("logs heard %v, with %v already cleaned; want %s before its folders went", ended, cleanedThen, testApp)
	}
}
