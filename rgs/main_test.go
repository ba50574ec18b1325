package rgs

import (
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"

	"github.com/knitdev/knit/rgs/podrecord"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// record is the RM's record of pod, as its pod cache keeps it.
func record(p *corev1.Pod) *podrecord.Pod { return newStripper().Record(p) }
