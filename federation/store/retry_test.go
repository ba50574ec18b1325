package store

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A failing API server is what is tested here, which the fake clientset's
// reactors give; the store's semantics run against a real one.
func TestTheStoreRidesOutTransientAPIFailuresOnly(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	tests := []struct {
		name      string
		failures  int
		err       error
		wantOK    bool
		wantTries int
	}{
		{"an unavailable API server twice", 2, apierrors.NewServiceUnavailable("etcd leader changed"), true, 3},
		{"a timeout once", 1, apierrors.NewServerTimeout(gr, "create", 1), true, 2},
		{"an outage longer than the retries", 100, apierrors.NewTooManyRequests("slow down", 0), false, retryTries},
		{"a refusal", 100, apierrors.NewForbidden(gr, "x", errors.New("no")), false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			tries := 0
			client.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				tries++
				if tries <= tt.failures {
					return true, nil, tt.err
				}
				return false, nil, nil
			})
			k, err := NewKube(KubeConfig{Client: client, Namespace: "fed"})
			if err != nil {
				t.Fatal(err)
			}
			home, err := k.AddApplicationHomeSubCluster(t.Context(), ApplicationHome{Application: "application_1_0001", Home: "sc1"})
			if (err == nil) != tt.wantOK || tries != tt.wantTries {
				t.Errorf("home %q, err %v after %d tries; want success %v after %d", home, err, tries, tt.wantOK, tt.wantTries)
			}
		})
	}
}
