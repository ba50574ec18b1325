package procnode

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestRestartDelay(t *testing.T) {
	t.Parallel()
	bo := backoffPolicy{Base: 10 * time.Second, Max: 5 * time.Minute}
	cases := []struct {
		step      int
		ran       time.Duration
		wantDelay time.Duration
		wantNext  int
	}{
		{0, time.Second, 0, 1}, // first restart: immediate
		{1, time.Second, 10 * time.Second, 2},
		{2, time.Second, 20 * time.Second, 3},
		{3, time.Second, 40 * time.Second, 4},
		{5, time.Second, 160 * time.Second, 6},
		{6, time.Second, 5 * time.Minute, 7}, // 320s capped
		{60, time.Second, 5 * time.Minute, 61},
		{4, 10 * time.Minute, 0, 1}, // ran 2·Max: the sequence starts over
		{4, 9 * time.Minute, 80 * time.Second, 5},
	}
	for _, tc := range cases {
		d, next := bo.restartDelay(tc.step, tc.ran)
		if d != tc.wantDelay || next != tc.wantNext {
			t.Errorf("restartDelay(%d, %s) = %s, %d; want %s, %d", tc.step, tc.ran, d, next, tc.wantDelay, tc.wantNext)
		}
	}
}

func TestRestartByPolicy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		policy corev1.RestartPolicy
		code   int
		want   bool
	}{
		{corev1.RestartPolicyAlways, 0, true},
		{corev1.RestartPolicyAlways, 1, true},
		{"", 0, true},
		{corev1.RestartPolicyOnFailure, 0, false},
		{corev1.RestartPolicyOnFailure, 2, true},
		{corev1.RestartPolicyNever, 0, false},
		{corev1.RestartPolicyNever, 2, false},
	}
	for _, tc := range cases {
		if got := restartByPolicy(tc.policy, tc.code); got != tc.want {
			t.Errorf("restartByPolicy(%q, %d) = %v", tc.policy, tc.code, got)
		}
	}
}

var (
	planNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	planBO  = backoffPolicy{Base: 10 * time.Second, Max: 5 * time.Minute}
)

func running(restart int, image string) *attemptObs {
	return &attemptObs{Restart: restart, Image: image, Running: true, StartedAt: planNow.Add(-time.Minute)}
}

// exited is a run that ended ago before planNow with code, after 1s.
func exited(restart, step, code int, ago time.Duration) *attemptObs {
	fin := planNow.Add(-ago)
	return &attemptObs{Restart: restart, Image: "img", BackoffStep: step,
		Exit: &exitRecord{ExitCode: code, StartedAt: fin.Add(-time.Second), FinishedAt: fin}}
}

func killed(a *attemptObs, reason string) *attemptObs {
	a.KillReason = reason
	return a
}

func planTestPod(policy corev1.RestartPolicy, inits, mains []string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	p.Spec.RestartPolicy = policy
	for _, n := range inits {
		c := corev1.Container{Name: strings.TrimSuffix(n, "+"), Image: "img", Command: []string{"x"}}
		if strings.HasSuffix(n, "+") { // sidecar
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
	for _, n := range mains {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n, Image: "img", Command: []string{"x"}})
	}
	return p
}

// planString renders a plan compactly: start:c@restart/step kill:c(reason) wait:c(reason) requeue:d.
func planString(p podPlan) string {
	var parts []string
	for _, s := range p.Start {
		parts = append(parts, fmt.Sprintf("start:%s@%d/%d", s.Container.Name, s.Restart, s.Step))
	}
	for _, k := range p.Kill {
		parts = append(parts, fmt.Sprintf("kill:%s(%s)", k.Container, k.Reason))
	}
	for _, n := range sortedKeys(p.Waiting) {
		parts = append(parts, fmt.Sprintf("wait:%s(%s)", n, p.Waiting[n].Reason))
	}
	if p.RequeueAfter > 0 {
		parts = append(parts, "requeue:"+p.RequeueAfter.String())
	}
	return strings.Join(parts, " ")
}

func TestPlanPod(t *testing.T) {
	t.Parallel()
	never, onFailure, always := corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure, corev1.RestartPolicyAlways
	cases := []struct {
		name   string
		pod    *corev1.Pod
		obs    map[string]containerObs
		mutate func(*corev1.Pod)
		want   string
	}{
		{name: "fresh pod starts all containers", pod: planTestPod(always, nil, []string{"a", "b"}),
			want: "start:a@0/0 start:b@0/0"},
		{name: "first init container first", pod: planTestPod(always, []string{"i1", "i2"}, []string{"a"}),
			want: "start:i1@0/0"},
		{name: "running init container blocks", pod: planTestPod(always, []string{"i1", "i2"}, []string{"a"}),
			obs: map[string]containerObs{"i1": {Latest: running(0, "img")}}, want: ""},
		{name: "next init after success", pod: planTestPod(always, []string{"i1", "i2"}, []string{"a"}),
			obs: map[string]containerObs{"i1": {Latest: exited(0, 0, 0, time.Second)}}, want: "start:i2@0/0"},
		{name: "containers after all inits", pod: planTestPod(always, []string{"i1", "i2"}, []string{"a"}),
			obs:  map[string]containerObs{"i1": {Latest: exited(0, 0, 0, time.Second)}, "i2": {Latest: exited(0, 0, 0, time.Second)}},
			want: "start:a@0/0"},
		{name: "failed init restarts at once the first time", pod: planTestPod(onFailure, []string{"i1"}, []string{"a"}),
			obs: map[string]containerObs{"i1": {Latest: exited(0, 0, 1, time.Second)}}, want: "start:i1@1/1"},
		{name: "failed init backs off", pod: planTestPod(always, []string{"i1"}, []string{"a"}),
			obs:  map[string]containerObs{"i1": {Latest: exited(1, 1, 1, 4*time.Second)}},
			want: "wait:i1(CrashLoopBackOff) requeue:6s"},
		{name: "failed init under Never ends the pod", pod: planTestPod(never, []string{"i1", "i2"}, []string{"a"}),
			obs: map[string]containerObs{"i1": {Latest: exited(0, 0, 1, time.Second)}}, want: ""},
		{name: "Never: exited containers stay", pod: planTestPod(never, nil, []string{"a", "b"}),
			obs:  map[string]containerObs{"a": {Latest: exited(0, 0, 0, time.Second)}, "b": {Latest: exited(0, 0, 2, time.Second)}},
			want: ""},
		{name: "OnFailure: success stays, failure restarts", pod: planTestPod(onFailure, nil, []string{"a", "b"}),
			obs:  map[string]containerObs{"a": {Latest: exited(0, 0, 0, time.Second)}, "b": {Latest: exited(0, 0, 2, time.Second)}},
			want: "start:b@1/1"},
		{name: "Always: success restarts too", pod: planTestPod(always, nil, []string{"a"}),
			obs: map[string]containerObs{"a": {Latest: exited(0, 0, 0, time.Second)}}, want: "start:a@1/1"},
		{name: "back-off doubles", pod: planTestPod(always, nil, []string{"a"}),
			obs: map[string]containerObs{"a": {Latest: exited(3, 3, 1, 15*time.Second)}}, want: "wait:a(CrashLoopBackOff) requeue:25s"},
		{name: "back-off over", pod: planTestPod(always, nil, []string{"a"}),
			obs: map[string]containerObs{"a": {Latest: exited(3, 3, 1, 41*time.Second)}}, want: "start:a@4/4"},
		{name: "image change kills a running container", pod: planTestPod(never, nil, []string{"a", "b"}),
			obs:  map[string]containerObs{"a": {Latest: running(0, "old")}, "b": {Latest: running(0, "img")}},
			want: "kill:a(ImageChanged)"},
		{name: "killed for image change restarts at once even under Never", pod: planTestPod(never, nil, []string{"a"}),
			obs: map[string]containerObs{"a": {Latest: killed(exited(0, 3, 143, 0), killImageChanged)}}, want: "start:a@1/1"},
		{name: "stopped for deletion never restarts", pod: planTestPod(always, nil, []string{"a"}),
			obs: map[string]containerObs{"a": {Latest: killed(exited(0, 0, 143, 0), killPodDeleted)}}, want: ""},
		{name: "stopped by StopAll restarts by policy", pod: planTestPod(always, nil, []string{"a"}),
			obs: map[string]containerObs{"a": {Latest: killed(exited(0, 0, 143, 0), killStopAll)}}, want: "start:a@1/1"},
		{name: "no command", pod: planTestPod(always, nil, []string{"a", "b"}),
			mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Command = nil },
			want:   "start:b@0/0 wait:a(CreateContainerError)"},
		{name: "no command in init blocks", pod: planTestPod(always, []string{"i1"}, []string{"a"}),
			mutate: func(p *corev1.Pod) { p.Spec.InitContainers[0].Command = nil },
			want:   "wait:i1(CreateContainerError)"},
		{name: "args alone are a command", pod: planTestPod(always, nil, []string{"a"}),
			mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Command, p.Spec.Containers[0].Args = nil, []string{"sh"} },
			want:   "start:a@0/0"},
		{name: "running sidecar lets the next init start", pod: planTestPod(never, []string{"s+", "i1"}, []string{"a"}),
			obs: map[string]containerObs{"s": {Latest: running(0, "img")}}, want: "start:i1@0/0"},
		{name: "sidecar restarts even under Never", pod: planTestPod(never, []string{"s+"}, []string{"a"}),
			obs:  map[string]containerObs{"s": {Latest: exited(0, 0, 0, time.Second)}, "a": {Latest: running(0, "img")}},
			want: "start:s@1/1"},
		{name: "sidecars stop when the work is done", pod: planTestPod(never, []string{"s+"}, []string{"a"}),
			obs:  map[string]containerObs{"s": {Latest: running(0, "img")}, "a": {Latest: exited(0, 0, 0, time.Second)}},
			want: "kill:s(PodCompleted)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mutate != nil {
				tc.mutate(tc.pod)
			}
			if got := planString(planPod(tc.pod, tc.obs, planNow, planBO)); got != tc.want {
				t.Errorf("plan = %q\nwant   %q", got, tc.want)
			}
		})
	}
}
