package procnode

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestTailLog(t *testing.T) {
	t.Parallel()
	var lines []string
	for i := 1; i <= 100; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	hundred := strings.Join(lines, "\n") + "\n"
	cases := []struct {
		name  string
		data  string
		lines int
		bytes int
		want  string
	}{
		{"empty", "", 80, 2048, ""},
		{"short", "a\nb\n", 80, 2048, "a\nb\n"},
		{"no final newline", "a\nb", 80, 2048, "a\nb"},
		{"last lines", hundred, 3, 2048, "line 98\nline 99\nline 100\n"},
		{"last 80 lines", hundred, 80, 2048, strings.Join(lines[20:], "\n") + "\n"},
		{"then last bytes", hundred, 80, 10, "\nline 100\n"},
	}
	for _, tc := range cases {
		if got := tailLog([]byte(tc.data), tc.lines, tc.bytes); got != tc.want {
			t.Errorf("%s: tailLog = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestTerminationMessage(t *testing.T) {
	t.Parallel()
	fallback := corev1.TerminationMessageFallbackToLogsOnError
	file := corev1.TerminationMessageReadFile
	notExist := fmt.Errorf("open: %w", fs.ErrNotExist)
	logs := func() ([]byte, error) { return []byte("log line 1\nlog line 2\n"), nil }
	cases := []struct {
		name    string
		data    string
		fileErr error
		policy  corev1.TerminationMessagePolicy
		ex      exitRecord
		want    string
	}{
		{"file, trimmed", "boom\n", nil, file, exitRecord{ExitCode: 3}, "boom"},
		{"file wins over logs", "boom", nil, fallback, exitRecord{ExitCode: 3}, "boom"},
		{"empty file, failure: logs", "", nil, fallback, exitRecord{ExitCode: 3}, "log line 1\nlog line 2"},
		{"no file, failure: logs", "", notExist, fallback, exitRecord{ExitCode: 3}, "log line 1\nlog line 2"},
		{"empty file, success: nothing", "", nil, fallback, exitRecord{ExitCode: 0}, ""},
		{"ReadFile policy never reads logs", "", nil, file, exitRecord{ExitCode: 3}, ""},
		{"start error: its message, no logs", "", nil, fallback,
			exitRecord{ExitCode: 128, Reason: reasonStartError, Message: "exec: nope"}, "exec: nope"},
		{"node message and file", "bye", nil, file,
			exitRecord{ExitCode: 137, Reason: reasonStatusUnknown, Message: "lost"}, "lost: bye"},
		{"unreadable file", "", errors.New("EIO"), fallback, exitRecord{ExitCode: 1}, "Error on reading termination log: EIO"},
	}
	for _, tc := range cases {
		got := terminationMessage([]byte(tc.data), tc.fileErr, tc.policy, &tc.ex, logs)
		if got != tc.want {
			t.Errorf("%s: message = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestReadFileTail(t *testing.T) {
	t.Parallel()
	p := t.TempDir() + "/f"
	if err := writeFileAtomic(p, []byte(strings.Repeat("a", 5000)+"END"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := readFileTail(p, maxTerminationMessageBytes)
	if err != nil || len(data) != maxTerminationMessageBytes || !strings.HasSuffix(string(data), "END") {
		t.Errorf("readFileTail: %d bytes, %v", len(data), err)
	}
}

// cs builds container statuses for podPhase tests: "r" running, "t0"/"t1"
// terminated with that exit code, "w" waiting, "w1" waiting after a run
// that exited 1.
func cs(name, state string) corev1.ContainerStatus {
	s := corev1.ContainerStatus{Name: name, Started: ptr.To(state == "r")}
	switch state {
	case "r":
		s.State.Running = &corev1.ContainerStateRunning{}
	case "t0":
		s.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0}
	case "t1":
		s.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1}
	case "w":
		s.State.Waiting = &corev1.ContainerStateWaiting{}
	case "w1":
		s.State.Waiting = &corev1.ContainerStateWaiting{}
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1}
	}
	return s
}

func TestPodPhase(t *testing.T) {
	t.Parallel()
	never, onFailure, always := corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure, corev1.RestartPolicyAlways
	cases := []struct {
		name     string
		policy   corev1.RestartPolicy
		inits    []string
		statuses []corev1.ContainerStatus
		terminal bool
		want     corev1.PodPhase
	}{
		{"nothing yet", always, nil, nil, false, corev1.PodPending},
		{"waiting", always, nil, []corev1.ContainerStatus{cs("a", "w")}, false, corev1.PodPending},
		{"running", always, nil, []corev1.ContainerStatus{cs("a", "r"), cs("b", "t0")}, false, corev1.PodRunning},
		{"init running", always, []string{"i"}, []corev1.ContainerStatus{cs("i", "r"), cs("a", "w")}, false, corev1.PodPending},
		{"init failed under Never", never, []string{"i"}, []corev1.ContainerStatus{cs("i", "t1"), cs("a", "w")}, false, corev1.PodFailed},
		{"init failed, will retry", onFailure, []string{"i"}, []corev1.ContainerStatus{cs("i", "w1"), cs("a", "w")}, false, corev1.PodPending},
		{"all succeeded, Never", never, nil, []corev1.ContainerStatus{cs("a", "t0"), cs("b", "t0")}, false, corev1.PodSucceeded},
		{"all succeeded, OnFailure", onFailure, nil, []corev1.ContainerStatus{cs("a", "t0")}, false, corev1.PodSucceeded},
		{"all succeeded, Always: restarting", always, nil, []corev1.ContainerStatus{cs("a", "t0")}, false, corev1.PodRunning},
		{"one failed, Never", never, nil, []corev1.ContainerStatus{cs("a", "t0"), cs("b", "t1")}, false, corev1.PodFailed},
		{"one failed, OnFailure: restarting", onFailure, nil, []corev1.ContainerStatus{cs("a", "t0"), cs("b", "w1")}, false, corev1.PodRunning},
		{"crash loop, Always", always, nil, []corev1.ContainerStatus{cs("a", "w1")}, false, corev1.PodRunning},
		{"deleted, all killed", always, nil, []corev1.ContainerStatus{cs("a", "t1")}, true, corev1.PodFailed},
		{"deleted, all succeeded", always, nil, []corev1.ContainerStatus{cs("a", "t0")}, true, corev1.PodSucceeded},
	}
	for _, tc := range cases {
		pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: tc.policy}}
		for _, n := range tc.inits {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: n})
		}
		for _, s := range tc.statuses {
			if !contains(tc.inits, s.Name) {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: s.Name})
			}
		}
		if len(pod.Spec.Containers) == 0 {
			pod.Spec.Containers = []corev1.Container{{Name: "a"}}
		}
		if got := podPhase(pod, tc.statuses, tc.terminal, false); got != tc.want {
			t.Errorf("%s: phase = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func condition(s corev1.PodStatus, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

func TestComputePodStatus(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 6, 7, 8, 9, 500, time.UTC)
	long := metav1.NewTime(now.Add(-time.Hour))
	pod := planTestPod(corev1.RestartPolicyAlways, []string{"init"}, []string{"b", "a"})
	pod.Generation = 3
	pod.Status = corev1.PodStatus{
		Phase:    corev1.PodPending,
		QOSClass: corev1.PodQOSBestEffort,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: long},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: long},
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: long},
		},
	}
	initRun := exited(0, 0, 0, time.Minute)
	initRun.ContainerID = "i0"
	aPrev := exited(0, 0, 1, time.Minute)
	aPrev.Message = "first crash"
	aRun := running(1, "img")
	aRun.ContainerID = "a1"
	in := statusInput{
		Pod: pod,
		Obs: map[string]containerObs{
			"init": {Latest: initRun},
			"a":    {Latest: aRun, Previous: aPrev},
			"b":    {Latest: exited(2, 2, 1, time.Second)},
		},
		Waiting:      map[string]waitingReason{"b": {Reason: reasonCrashLoopBackOff, Message: "back-off"}},
		SandboxReady: true,
		Address:      "127.0.1.1",
		Now:          now,
	}
	s := computePodStatus(in)

	if s.Phase != corev1.PodRunning {
		t.Errorf("phase = %s", s.Phase)
	}
	if s.QOSClass != corev1.PodQOSBestEffort || s.HostIP != "127.0.1.1" || s.PodIP != "127.0.1.1" ||
		len(s.PodIPs) != 1 || len(s.HostIPs) != 1 || s.ObservedGeneration != 3 {
		t.Errorf("status fields: %+v", s)
	}
	if s.StartTime == nil || !s.StartTime.Time.Equal(now.Truncate(time.Second)) {
		t.Errorf("startTime = %v", s.StartTime)
	}
	if len(s.ContainerStatuses) != 2 || s.ContainerStatuses[0].Name != "a" {
		t.Fatalf("container statuses not sorted by name: %+v", s.ContainerStatuses)
	}
	a, b, ini := s.ContainerStatuses[0], s.ContainerStatuses[1], s.InitContainerStatuses[0]
	if a.State.Running == nil || !a.Ready || !*a.Started || a.RestartCount != 1 || a.ContainerID != "knit://a1" ||
		a.LastTerminationState.Terminated == nil || a.LastTerminationState.Terminated.Message != "first crash" {
		t.Errorf("a = %+v", a)
	}
	if b.State.Waiting == nil || b.State.Waiting.Reason != reasonCrashLoopBackOff || b.Ready ||
		b.LastTerminationState.Terminated == nil || b.LastTerminationState.Terminated.Reason != "Error" || b.RestartCount != 2 {
		t.Errorf("b = %+v", b)
	}
	if ini.State.Terminated == nil || ini.State.Terminated.Reason != "Completed" || !ini.Ready || *ini.Started {
		t.Errorf("init = %+v", ini)
	}
	if c := condition(s, corev1.PodScheduled); c == nil || !c.LastTransitionTime.Equal(&long) {
		t.Errorf("PodScheduled not kept: %+v", c)
	}
	if c := condition(s, corev1.PodReadyToStartContainers); c == nil || c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Equal(&long) {
		t.Errorf("PodReadyToStartContainers = %+v, want True since long ago", c)
	}
	if c := condition(s, corev1.PodInitialized); c == nil || c.Status != corev1.ConditionTrue || c.ObservedGeneration != 3 {
		t.Errorf("Initialized = %+v", c)
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		c := condition(s, ct)
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != reasonContainersNotReady ||
			c.Message != "containers with unready status: [b]" {
			t.Errorf("%s = %+v", ct, c)
		}
	}
	if c := condition(s, corev1.PodReady); !c.LastTransitionTime.Equal(&long) {
		t.Errorf("Ready kept its status but lost its transition time: %v", c.LastTransitionTime)
	}

	// Once b runs, the pod is ready; the transition is stamped now.
	in.Obs["b"] = containerObs{Latest: running(3, "img")}
	in.Waiting = nil
	s = computePodStatus(in)
	if c := condition(s, corev1.PodReady); c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Time.Equal(now.Truncate(time.Second)) {
		t.Errorf("Ready = %+v", c)
	}
}

func TestComputePodStatusFreshAndTerminal(t *testing.T) {
	t.Parallel()
	now := time.Now()
	pod := planTestPod(corev1.RestartPolicyNever, []string{"i1", "i2"}, []string{"a"})
	s := computePodStatus(statusInput{Pod: pod, Obs: map[string]containerObs{}, Address: "127.0.1.2", Now: now})
	if s.Phase != corev1.PodPending {
		t.Errorf("phase = %s", s.Phase)
	}
	for _, st := range append(s.InitContainerStatuses, s.ContainerStatuses...) {
		if st.State.Waiting == nil || st.State.Waiting.Reason != reasonPodInitializing || st.Image != "img" {
			t.Errorf("%s = %+v, want waiting PodInitializing", st.Name, st)
		}
	}
	if c := condition(s, corev1.PodInitialized); c.Status != corev1.ConditionFalse ||
		c.Message != "containers with incomplete status: [i1 i2]" {
		t.Errorf("Initialized = %+v", c)
	}
	if c := condition(s, corev1.PodReadyToStartContainers); c.Status != corev1.ConditionFalse {
		t.Errorf("sandbox not ready, condition = %+v", c)
	}

	// Deleted while i1 ran: i1 is killed, the rest never started.
	s = computePodStatus(statusInput{Pod: pod, Terminal: true, SandboxReady: true, Now: now, Address: "127.0.1.2",
		Obs: map[string]containerObs{"i1": {Latest: exited(0, 0, 143, 0)}}})
	if s.Phase != corev1.PodFailed {
		t.Errorf("terminal phase = %s", s.Phase)
	}
	if st := s.InitContainerStatuses[0]; st.State.Terminated == nil || st.State.Terminated.ExitCode != 143 {
		t.Errorf("i1 = %+v", st)
	}
	if st := s.InitContainerStatuses[1]; st.State.Waiting == nil {
		t.Errorf("i2 never started, yet = %+v", st)
	}
	if c := condition(s, corev1.PodReadyToStartContainers); c.Status != corev1.ConditionFalse {
		t.Errorf("terminal pod keeps a sandbox: %+v", c)
	}

	// Succeeded pods report PodCompleted.
	pod = planTestPod(corev1.RestartPolicyNever, nil, []string{"a"})
	s = computePodStatus(statusInput{Pod: pod, Now: now, Obs: map[string]containerObs{"a": {Latest: exited(0, 0, 0, 0)}}})
	if s.Phase != corev1.PodSucceeded {
		t.Fatalf("phase = %s", s.Phase)
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		if c := condition(s, ct); c.Status != corev1.ConditionFalse || c.Reason != reasonPodCompleted {
			t.Errorf("%s = %+v", ct, c)
		}
	}
	if c := condition(s, corev1.PodInitialized); c.Status != corev1.ConditionTrue || c.Reason != reasonPodCompleted {
		t.Errorf("Initialized = %+v", c)
	}

	// A terminal phase in the API is never left, and a run whose files are
	// gone keeps the terminated state the API has.
	pod.Status = s
	s2 := computePodStatus(statusInput{Pod: pod, Now: now, Obs: map[string]containerObs{}})
	if s2.Phase != corev1.PodSucceeded || s2.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("after losing the files: phase %s, a = %+v", s2.Phase, s2.ContainerStatuses[0])
	}
}
