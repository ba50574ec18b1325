package procnode

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Limits on termination messages, the kubelet's.
const (
	maxTerminationMessageBytes    = 4096 // read from the end of the termination message file
	maxTerminationMessageLogBytes = 2048 // FallbackToLogsOnError: at most these last bytes …
	maxTerminationMessageLogLines = 80   // … of these last lines of the log
)

// Kubelet-owned pod condition reasons.
const (
	reasonContainersNotReady       = "ContainersNotReady"
	reasonContainersNotInitialized = "ContainersNotInitialized"
	reasonPodCompleted             = "PodCompleted"
	reasonPodFailed                = "PodFailed"
	reasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// terminationMessage picks the message of an ended run as the kubelet
// does: the termination message file (its last 4096 bytes); with
// FallbackToLogsOnError, a non-zero exit and no message, the end of the log
// instead; a message of the node's own (start error, lost shim) comes
// first. Trailing white space is trimmed, so `echo boom >
// /dev/termination-log` reads "boom" (the kubelet would keep the newline).
func terminationMessage(fileData []byte, fileErr error, policy corev1.TerminationMessagePolicy, ex *exitRecord, readLog func() ([]byte, error)) string {
	fallback := policy == corev1.TerminationMessageFallbackToLogsOnError && ex.ExitCode != 0 && ex.Reason != reasonStartError
	var msg string
	checkLogs := fallback
	switch {
	case fileErr == nil:
		msg = string(fileData)
		checkLogs = fallback && len(fileData) == 0
	case errors.Is(fileErr, fs.ErrNotExist):
	default:
		msg = fmt.Sprintf("Error on reading termination log: %v", fileErr)
		checkLogs = false
	}
	if checkLogs {
		data, err := readLog()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			msg = fmt.Sprintf("Error on reading termination message from logs: %v", err)
		} else {
			msg = tailLog(data, maxTerminationMessageLogLines, maxTerminationMessageLogBytes)
		}
	}
	msg = strings.TrimRight(msg, " \t\r\n")
	if ex.Message != "" {
		if msg != "" {
			return ex.Message + ": " + msg
		}
		return ex.Message
	}
	return msg
}

// tailLog returns at most the last maxLines lines of data, and of those at
// most the last maxBytes bytes.
func tailLog(data []byte, maxLines, maxBytes int) string {
	end := len(data)
	body := data
	if end > 0 && data[end-1] == '\n' {
		body = data[:end-1] // a final newline does not start another line
	}
	start := 0
	for n, i := 0, len(body)-1; i >= 0; i-- {
		if body[i] == '\n' {
			n++
			if n == maxLines {
				start = i + 1
				break
			}
		}
	}
	if end-start > maxBytes {
		start = end - maxBytes
	}
	return string(data[start:end])
}

// readFileTail reads at most the last max bytes of p.
func readFileTail(p string, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max {
		if _, err := f.Seek(st.Size()-max, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// statusInput is everything computePodStatus looks at.
type statusInput struct {
	Pod          *corev1.Pod // its Status is the old status to build on
	Obs          map[string]containerObs
	Waiting      map[string]waitingReason
	SandboxReady bool // the pod's folder and volumes are in place
	// Terminal: the pod was deleted and all its containers are stopped;
	// report the final status the kubelet reports before its last delete.
	Terminal bool
	// Allocated is what the node granted the pod's containers (nil before
	// any started: the spec is reported); ResizePending is a resize the
	// node did not take, reported as the PodResizePending condition.
	Allocated     podAllocation
	ResizePending *resizeDecision
	Address       string
	Now           time.Time
}

// computePodStatus builds the pod status as the kubelet's
// generateAPIPodStatus does, for the fields a kubelet owns; everything else
// (PodScheduled and other conditions, qosClass, nominatedNodeName …) is
// kept from the old status. It does no I/O.
func computePodStatus(in statusInput) corev1.PodStatus {
	pod := in.Pod
	old := pod.Status
	s := *old.DeepCopy()
	now := metav1.NewTime(apiTime(in.Now))

	defWaiting := reasonContainerCreating
	if len(pod.Spec.InitContainers) > 0 {
		defWaiting = reasonPodInitializing
	}
	oldInit := statusByName(old.InitContainerStatuses)
	oldMain := statusByName(old.ContainerStatuses)

	s.InitContainerStatuses = nil
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		s.InitContainerStatuses = append(s.InitContainerStatuses,
			containerStatus(c, in.Obs[c.Name], in.waiting(c.Name), defWaiting, oldInit[c.Name], in.Allocated.resourcesOf(c), true, in.Terminal))
	}
	s.ContainerStatuses = nil
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		s.ContainerStatuses = append(s.ContainerStatuses,
			containerStatus(c, in.Obs[c.Name], in.waiting(c.Name), defWaiting, oldMain[c.Name], in.Allocated.resourcesOf(c), false, in.Terminal))
	}
	sort.SliceStable(s.ContainerStatuses, func(i, j int) bool { return s.ContainerStatuses[i].Name < s.ContainerStatuses[j].Name })

	started := false // HasAnyActiveRegularContainerStarted
	for i := range pod.Spec.Containers {
		if in.Obs[pod.Spec.Containers[i].Name].Latest != nil {
			started = true
		}
	}
	if in.Terminal {
		markUnknownAtTermination(pod, &s, started)
	}
	all := append(append([]corev1.ContainerStatus{}, s.ContainerStatuses...), s.InitContainerStatuses...)
	s.Phase = podPhase(pod, all, in.Terminal, started)
	if in.Terminal && s.Phase != corev1.PodSucceeded && s.Phase != corev1.PodFailed {
		s.Phase = corev1.PodFailed // the kubelet's TerminatePod: a deleted pod ends terminal
	}
	if old.Phase == corev1.PodSucceeded || old.Phase == corev1.PodFailed {
		s.Phase = old.Phase // pods never leave a terminal phase
	}
	if s.Phase != old.Phase {
		s.Reason, s.Message = "", ""
	}

	// Conditions: keep those the kubelet does not own (PodScheduled
	// included: the scheduler set it), then ours in the kubelet's order:
	// the resize conditions first (gone once the pod is terminal), then
	// the ones generated from the containers. PodResizeInProgress is never
	// set: nothing is actuated, so an accepted resize is complete at once.
	var conds []corev1.PodCondition
	for _, c := range old.Conditions {
		switch c.Type {
		case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady,
			corev1.PodResizePending, corev1.PodResizeInProgress:
		default:
			conds = append(conds, c)
		}
	}
	terminal := in.Terminal || s.Phase == corev1.PodSucceeded || s.Phase == corev1.PodFailed
	if in.ResizePending != nil && !terminal {
		conds = append(conds, resizePendingCondition(*in.ResizePending, old.Conditions, in.Now))
	}
	allForConds := append(append([]corev1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...)
	sandbox := corev1.ConditionFalse
	if in.SandboxReady && !in.Terminal && s.Phase != corev1.PodSucceeded && s.Phase != corev1.PodFailed {
		sandbox = corev1.ConditionTrue
	}
	containersReady := containersReadyCondition(pod, allForConds, s.Phase)
	owned := []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: sandbox},
		initializedCondition(pod, allForConds, s.Phase),
		podReadyCondition(pod, conds, containersReady),
		containersReady,
	}
	for _, c := range owned {
		c.ObservedGeneration = pod.Generation
		c.LastTransitionTime = now
		for _, o := range old.Conditions {
			if o.Type == c.Type && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		conds = append(conds, c)
	}
	s.Conditions = conds

	// Processes share the host network: host and pod IP are the node's.
	s.HostIP, s.PodIP = in.Address, in.Address
	s.HostIPs = []corev1.HostIP{{IP: in.Address}}
	s.PodIPs = []corev1.PodIP{{IP: in.Address}}
	if s.StartTime == nil {
		s.StartTime = &now
	}
	s.ObservedGeneration = pod.Generation
	return s
}

func (in statusInput) waiting(name string) *waitingReason {
	if w, ok := in.Waiting[name]; ok {
		return &w
	}
	return nil
}

func statusByName(list []corev1.ContainerStatus) map[string]*corev1.ContainerStatus {
	m := make(map[string]*corev1.ContainerStatus, len(list))
	for i := range list {
		m[list[i].Name] = &list[i]
	}
	return m
}

// containerStatus reports one container: running, terminated, or waiting
// (a default reason, or the plan's CrashLoopBackOff / CreateContainerError,
// with the run that ended as lastState). There are no probes: a running
// container is started and ready at once. A container that ran reports
// res, its allocation, as allocatedResources (requests) and resources
// (what it runs with: nothing is enforced, so the same), as the kubelet
// reports every container the runtime knows of.
func containerStatus(c *corev1.Container, o containerObs, w *waitingReason, defWaiting string, old *corev1.ContainerStatus, res corev1.ResourceRequirements, init, terminal bool) corev1.ContainerStatus {
	st := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), Started: ptr.To(false)}
	l := o.Latest
	if l == nil {
		if old != nil && old.State.Terminated != nil {
			// The node lost the files of a run it reported as over (the pod
			// folder is gone); the kubelet keeps such final states too.
			return *old.DeepCopy()
		}
		st.State.Waiting = &corev1.ContainerStateWaiting{Reason: defWaiting}
		if w != nil {
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		}
		if old != nil {
			st.RestartCount = old.RestartCount
			st.LastTerminationState = *old.LastTerminationState.DeepCopy()
		}
		return st
	}
	st.Image, st.ImageID = l.Image, imageID(l.Image)
	st.ContainerID = containerIDPrefix + l.ContainerID
	st.RestartCount = int32(l.Restart)
	st.AllocatedResources = res.Requests.DeepCopy()
	st.Resources = &res
	switch {
	case l.Running:
		st.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(apiTime(l.StartedAt))}
		st.Started, st.Ready = ptr.To(true), true
		st.LastTerminationState = terminatedState(o.Previous)
	case w != nil && !terminal:
		st.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		st.LastTerminationState = terminatedState(l)
	default:
		st.State = terminatedState(l)
		st.LastTerminationState = terminatedState(o.Previous)
		// A regular init container that succeeded counts as ready.
		st.Ready = init && !isSidecar(c) && l.Exit.ExitCode == 0
	}
	return st
}

const containerIDPrefix = "knit://"

// imageID: a process node pulls nothing, so the reference is all there is.
func imageID(image string) string { return image }

func terminatedState(a *attemptObs) corev1.ContainerState {
	if a == nil || a.Exit == nil {
		return corev1.ContainerState{}
	}
	reason := a.Exit.Reason
	if reason == "" {
		reason = "Completed"
		if a.Exit.ExitCode != 0 {
			reason = "Error"
		}
	}
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode:    int32(a.Exit.ExitCode),
		Reason:      reason,
		Message:     a.Message,
		StartedAt:   metav1.NewTime(apiTime(a.Exit.StartedAt)),
		FinishedAt:  metav1.NewTime(apiTime(a.Exit.FinishedAt)),
		ContainerID: containerIDPrefix + a.ContainerID,
	}}
}

// markUnknownAtTermination is the kubelet's TerminatePod: in the final
// status of a deleted pod, a container that never ended on record is
// reported terminated with ContainerStatusUnknown, so the pod never looks
// successful by accident. Regular containers only once the pod
// initialized; init containers up to the last one that ever started.
func markUnknownAtTermination(pod *corev1.Pod, s *corev1.PodStatus, initialized bool) {
	unknown := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		Reason: reasonStatusUnknown, Message: "The container could not be located when the pod was terminated", ExitCode: exitCodeStatusUnknown,
	}}
	if initialized {
		for i := range s.ContainerStatuses {
			if s.ContainerStatuses[i].State.Terminated == nil {
				s.ContainerStatuses[i].State = unknown
			}
		}
	}
	last := -1
	for i, cs := range s.InitContainerStatuses {
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != reasonPodInitializing || cs.LastTerminationState.Terminated != nil {
			last = i
		}
	}
	for i := 0; i <= last; i++ {
		if s.InitContainerStatuses[i].State.Terminated == nil {
			s.InitContainerStatuses[i].State = *unknown.DeepCopy()
		}
	}
}

// podPhase is the kubelet's getPhase (without the alpha
// ContainerRestartRules gate).
func podPhase(pod *corev1.Pod, info []corev1.ContainerStatus, podIsTerminal, podHasInitialized bool) corev1.PodPhase {
	spec := pod.Spec
	byName := statusByName(info)
	pendingRestartableInit, pendingRegularInit, failedInit := 0, 0, 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if isSidecar(c) {
			continue
		}
		cs, ok := byName[c.Name]
		switch {
		case !ok:
			pendingRegularInit++
		case cs.State.Running != nil:
			pendingRegularInit++
		case cs.State.Terminated != nil:
			if cs.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				if cs.LastTerminationState.Terminated.ExitCode != 0 {
					failedInit++
				}
			} else {
				pendingRegularInit++
			}
		default:
			pendingRegularInit++
		}
	}
	unknown, running, waiting, stopped, succeeded := 0, 0, 0, 0, 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if !isSidecar(c) {
			continue
		}
		cs, ok := byName[c.Name]
		switch {
		case !ok:
			unknown++
		case cs.State.Running != nil:
			if cs.Started == nil || !*cs.Started {
				pendingRestartableInit++
			}
			running++
		case cs.State.Terminated != nil:
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated == nil {
				pendingRestartableInit++
				waiting++
			}
		default:
			pendingRestartableInit++
			unknown++
		}
	}
	for i := range spec.Containers {
		cs, ok := byName[spec.Containers[i].Name]
		switch {
		case !ok:
			unknown++
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	if failedInit > 0 && spec.RestartPolicy == corev1.RestartPolicyNever {
		return corev1.PodFailed
	}
	switch {
	case pendingRegularInit > 0 || (pendingRestartableInit > 0 && !podHasInitialized):
		return corev1.PodPending
	case waiting > 0:
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if podIsTerminal {
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		}
		if spec.RestartPolicy == corev1.RestartPolicyAlways || spec.RestartPolicy == "" {
			return corev1.PodRunning
		}
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		if spec.RestartPolicy == corev1.RestartPolicyNever {
			return corev1.PodFailed
		}
		return corev1.PodRunning
	default:
		return corev1.PodPending
	}
}

// containersReadyCondition is the kubelet's GenerateContainersReadyCondition.
func containersReadyCondition(pod *corev1.Pod, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	byName := statusByName(statuses)
	var unknown, unready []string
	check := func(name string) {
		if cs, ok := byName[name]; !ok {
			unknown = append(unknown, name)
		} else if !cs.Ready {
			unready = append(unready, name)
		}
	}
	for i := range pod.Spec.InitContainers {
		if isSidecar(&pod.Spec.InitContainers[i]) {
			check(pod.Spec.InitContainers[i].Name)
		}
	}
	for i := range pod.Spec.Containers {
		check(pod.Spec.Containers[i].Name)
	}
	if (phase == corev1.PodSucceeded && len(unknown) == 0) || phase == corev1.PodFailed {
		reason := reasonPodCompleted
		if phase == corev1.PodFailed {
			reason = reasonPodFailed
		}
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: reason}
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(unready) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unready status: %s", unready))
	}
	if len(msgs) > 0 {
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse,
			Reason: reasonContainersNotReady, Message: strings.Join(msgs, ", ")}
	}
	return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}
}

// podReadyCondition is the kubelet's GeneratePodReadyCondition.
func podReadyCondition(pod *corev1.Pod, conds []corev1.PodCondition, containersReady corev1.PodCondition) corev1.PodCondition {
	if containersReady.Status != corev1.ConditionTrue {
		return corev1.PodCondition{Type: corev1.PodReady, Status: containersReady.Status,
			Reason: containersReady.Reason, Message: containersReady.Message}
	}
	var msgs []string
	for _, rg := range pod.Spec.ReadinessGates {
		var found *corev1.PodCondition
		for i := range conds {
			if conds[i].Type == rg.ConditionType {
				found = &conds[i]
			}
		}
		if found == nil {
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(rg.ConditionType)))
		} else if found.Status != corev1.ConditionTrue {
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(rg.ConditionType), found.Status))
		}
	}
	if len(msgs) > 0 {
		return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse,
			Reason: reasonReadinessGatesNotReady, Message: strings.Join(msgs, ", ")}
	}
	return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
}

// initializedCondition is the kubelet's GeneratePodInitializedCondition.
func initializedCondition(pod *corev1.Pod, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	byName := statusByName(statuses)
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs, ok := byName[c.Name]
		if !ok {
			unknown = append(unknown, c.Name)
			continue
		}
		if isSidecar(c) {
			if cs.Started == nil || !*cs.Started {
				incomplete = append(incomplete, c.Name)
			}
		} else if !cs.Ready {
			incomplete = append(incomplete, c.Name)
		}
	}
	if phase == corev1.PodSucceeded && len(unknown) == 0 {
		return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, Reason: reasonPodCompleted}
	}
	for i := range pod.Spec.Containers {
		if cs, ok := byName[pod.Spec.Containers[i].Name]; ok && (cs.State.Running != nil || cs.State.Terminated != nil) {
			// A regular container ran: the pod initialized before.
			return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
		}
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(incomplete) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with incomplete status: %s", incomplete))
	}
	if len(msgs) > 0 {
		return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionFalse,
			Reason: reasonContainersNotInitialized, Message: strings.Join(msgs, ", ")}
	}
	return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
}
