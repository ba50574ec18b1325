package logs

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/knitdev/knit/rks/launch"
)

func TestStatusPublisherAnnotatesTheNode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Annotations: map[string]string{
		launch.AnnotationLogAggregation: `{"application_1_0001":"SUCCEEDED"}`}}}
	client := fake.NewClientset(node)
	p := NewStatusPublisher(client, "node-1", nil)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = p.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	annotation := func() map[string]string {
		n, err := client.CoreV1().Nodes().Get(t.Context(), "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := launch.DecodeLogAggregation(n.Annotations[launch.AnnotationLogAggregation])
		return m
	}
	p.SetStatus("application_1_0002", StatusRunning)
	waitFor(t, "RUNNING published", func() bool { return annotation()["application_1_0002"] == StatusRunning })
	p.SetStatus("application_1_0002", StatusSucceeded)
	waitFor(t, "SUCCEEDED published", func() bool { return annotation()["application_1_0002"] == StatusSucceeded })
	if annotation()["application_1_0001"] != StatusSucceeded {
		t.Errorf("the status from before the restart was lost: %v", annotation())
	}
	for i := 0; i < launch.MaxLogAggregationApps+10; i++ {
		p.SetStatus(fmt.Sprintf("application_2_%04d", i), StatusSucceeded)
	}
	waitFor(t, "the newest published", func() bool {
		return annotation()[fmt.Sprintf("application_2_%04d", launch.MaxLogAggregationApps+9)] == StatusSucceeded
	})
	if n := len(annotation()); n != launch.MaxLogAggregationApps {
		t.Errorf("%d applications published, want at most %d", n, launch.MaxLogAggregationApps)
	}
}
