package rgs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
)

func TestASyncsErrorRequeuesItsKeyUnlessNoRetryCanMendIt(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil)
	transient := apierrors.NewInternalError(errors.New("etcd timeout"))
	tests := []struct {
		name        string
		err         error
		wantRequeue bool
		wantLog     string
	}{
		{"success is forgotten", nil, false, ""},
		{"a transient error is retried", fmt.Errorf("rgs: create pod: %w", transient), true, "level=WARN"},
		{"a conflict is retried", apierrors.NewConflict(pods, "p", errors.New("changed")), true, "level=WARN"},
		{"an error of no API is retried", errors.New("no node"), true, "level=WARN"},
		{"an invalid write is not", fmt.Errorf("rgs: create pod: %w", invalid), false, "level=ERROR"},
		{"a forbidden write is not", apierrors.NewForbidden(pods, "p", errors.New("denied by webhook")), false, "level=ERROR"},
		{"a namespace out of quota is, as pods may end",
			apierrors.NewForbidden(pods, "p", errors.New("exceeded quota: q, requested: pods=1, used: pods=10, limited: pods=10")), true, "level=WARN"},
		{"writes all refused for good are not", errors.Join(invalid, fmt.Errorf("x: %w", apierrors.NewBadRequest("bad"))), false, "level=ERROR"},
		{"one transient write among refused ones is", errors.Join(invalid, nil, transient), true, "level=WARN"},
		{"a wrapped join with a transient write is", fmt.Errorf("sync: %w", errors.Join(invalid, transient)), true, "level=WARN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
			defer q.ShutDown()
			q.Add("k")
			k, _ := q.Get()
			finish(context.Background(), log, q, k, tt.err, "sync", "key", k)
			q.Done(k)
			if got := q.NumRequeues("k") > 0; got != tt.wantRequeue {
				t.Errorf("requeued %v, want %v", got, tt.wantRequeue)
			}
			if tt.wantLog == "" && buf.Len() != 0 || !strings.Contains(buf.String(), tt.wantLog) {
				t.Errorf("logged %q, want %q", buf.String(), tt.wantLog)
			}
		})
	}
}
