package rgs

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/knitdev/knit/rgs/podrecord"
	"github.com/knitdev/knit/rks/launch"
)

func TestThePodInformerOfAFederationMemberSeesOnlyItsSubClustersPods(t *testing.T) {
	pod := func(name string, l map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: l}}
	}
	app := "application_1700000000000_0001"
	client := fake.NewClientset(
		pod("sc1", map[string]string{launch.LabelApplication: app, launch.LabelSubCluster: "sc1"}),
		pod("sc2", map[string]string{launch.LabelApplication: app, launch.LabelSubCluster: "sc2"}),
		pod("unfederated", map[string]string{launch.LabelApplication: app}),
		pod("not-knits", map[string]string{launch.LabelSubCluster: "sc1"}),
	)
	tests := []struct {
		name       string
		subCluster string
		want       []string
	}{
		{name: "an RM outside a federation sees every Knit pod", want: []string{"sc1", "sc2", "unfederated"}},
		{name: "a sub-cluster's RM sees its own", subCluster: "sc2", want: []string{"sc2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewPodInformerFactory(client, tt.subCluster)
			lister := podrecord.NewLister(f.Core().V1().Pods().Informer().GetIndexer(), newStripper())
			f.Start(t.Context().Done())
			t.Cleanup(f.Shutdown)
			for typ, ok := range f.WaitForCacheSync(t.Context().Done()) {
				if !ok {
					t.Fatalf("%v not synced", typ)
				}
			}
			pods, err := lister.List(labels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range pods {
				got = append(got, p.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("pods %v, want %v", got, tt.want)
			}
		})
	}
}
