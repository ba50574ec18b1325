package procnode

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// containerObs is what the node's Dir says about one container: its latest
// run and the one before (for lastState). Both nil: never started.
type containerObs struct {
	Latest   *attemptObs
	Previous *attemptObs
}

// attemptObs is one run as the pure planning and status code see it.
type attemptObs struct {
	Restart     int
	ContainerID string
	Image       string
	BackoffStep int
	StartedAt   time.Time
	Running     bool
	Exit        *exitRecord // set once the run ended
	KillReason  string      // why the node stopped it, if it did
	Message     string      // termination message of an ended run
}

// waitingReason is a container's waiting state the plan decided on.
type waitingReason struct {
	Reason, Message string
}

// Waiting reasons, as the kubelet spells them.
const (
	reasonContainerCreating          = "ContainerCreating"
	reasonPodInitializing            = "PodInitializing"
	reasonCrashLoopBackOff           = "CrashLoopBackOff"
	reasonCreateContainerError       = "CreateContainerError"
	reasonCreateContainerConfigError = "CreateContainerConfigError"
)

type startAction struct {
	Container *corev1.Container
	Init      bool
	Restart   int // the new run's number, = its restartCount
	Step      int // its back-off step
}

type killAction struct {
	Container string
	Reason    string
}

// podPlan is what one sync should do for a pod that is not being deleted.
type podPlan struct {
	Start        []startAction
	Kill         []killAction
	Waiting      map[string]waitingReason
	RequeueAfter time.Duration // earliest end of a back-off, 0 if none
}

// backoffPolicy is the kubelet's crash-loop back-off: the first restart is
// immediate, each next one waits Base, 2·Base, 4·Base … up to Max. A run
// that lasted 2·Max or longer resets the sequence, as the kubelet forgets
// a back-off entry that old.
type backoffPolicy struct {
	Base, Max time.Duration
}

// restartDelay says how long after a run of the given step that lasted ran
// the next run may start, and the step the next run gets. Steps are kept
// on disk with each run, so a restarted node continues the sequence.
func (b backoffPolicy) restartDelay(step int, ran time.Duration) (time.Duration, int) {
	if step <= 0 || ran >= 2*b.Max {
		return 0, 1
	}
	d := b.Base
	for i := 1; i < step && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max), step + 1
}

// restartByPolicy reports whether a regular container that exited with
// code should run again under the pod's restartPolicy.
func restartByPolicy(policy corev1.RestartPolicy, code int) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	}
	return true // Always, and the API default
}

// killEndsRun reports whether a run the node stopped for this reason must
// not be restarted: the pod is done or going away. Runs ended by StopAll
// restart by policy, as after a machine reboot.
func killEndsRun(reason string) bool {
	return reason == killPodCompleted || reason == killPodDeleted || reason == killPodGone
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// hasNoCommand reports a container a process node cannot run: without an
// image there is no entrypoint to fall back on.
func hasNoCommand(c *corev1.Container) bool {
	return len(c.Command) == 0 && len(c.Args) == 0
}

func noCommandWaiting(c *corev1.Container) waitingReason {
	return waitingReason{Reason: reasonCreateContainerError,
		Message: fmt.Sprintf("container %q has neither command nor args, and a process node has no image entrypoint to run", c.Name)}
}

// planPod decides, from the pod spec and what is on disk, which containers
// to start and stop now, as the kubelet's computePodActions does: init
// containers one after the other, each to exit 0 before the next (sidecar
// init containers only to be running); then every container; restarts by
// restartPolicy with crash-loop back-off; a running container whose image
// changed is stopped and started again. It does no I/O.
func planPod(pod *corev1.Pod, obs map[string]containerObs, now time.Time, bo backoffPolicy) podPlan {
	p := podPlan{Waiting: map[string]waitingReason{}}
	policy := pod.Spec.RestartPolicy

	// A pod whose work is over starts nothing and stops its sidecars.
	if podWorkDone(pod, obs) {
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if l := obs[c.Name].Latest; isSidecar(c) && l != nil && l.Running {
				p.Kill = append(p.Kill, killAction{Container: c.Name, Reason: killPodCompleted})
			}
		}
		return p
	}

	initialized := false // a regular container ran before: sidecars may restart without blocking
	for i := range pod.Spec.Containers {
		if obs[pod.Spec.Containers[i].Name].Latest != nil {
			initialized = true
		}
	}

	initDone := true
initLoop:
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		sidecar := isSidecar(c)
		if hasNoCommand(c) {
			p.Waiting[c.Name] = noCommandWaiting(c)
			initDone = false
			break
		}
		l := obs[c.Name].Latest
		switch {
		case l == nil:
			p.Start = append(p.Start, startAction{Container: c, Init: true})
			initDone = false
			break initLoop
		case l.Running:
			if sidecar {
				if l.Image != c.Image {
					p.Kill = append(p.Kill, killAction{Container: c.Name, Reason: killImageChanged})
				}
				continue // a running sidecar lets the next init container start
			}
			initDone = false
			break initLoop
		case !sidecar && l.Exit.ExitCode == 0 && l.KillReason != killImageChanged:
			continue
		default:
			// Failed init containers restart unless the pod's policy is
			// Never (then podWorkDone holds); sidecars always restart.
			p.restart(pod, c, true, l, now, bo)
			if sidecar && initialized {
				continue
			}
			initDone = false
			break initLoop
		}
	}
	if !initDone {
		return p
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if hasNoCommand(c) {
			p.Waiting[c.Name] = noCommandWaiting(c)
			continue
		}
		l := obs[c.Name].Latest
		switch {
		case l == nil:
			p.Start = append(p.Start, startAction{Container: c})
		case l.Running:
			if l.Image != c.Image {
				// Image is the only mutable container field; the kubelet
				// restarts a container whose spec changed regardless of policy.
				p.Kill = append(p.Kill, killAction{Container: c.Name, Reason: killImageChanged})
			}
		case l.KillReason == killImageChanged:
			p.restart(pod, c, false, l, now, bo)
		case killEndsRun(l.KillReason):
		case restartByPolicy(policy, l.Exit.ExitCode):
			p.restart(pod, c, false, l, now, bo)
		}
	}
	return p
}

// restart plans the next run of c after run l ended: now if its back-off
// has passed (or it was stopped for an image change), else a
// CrashLoopBackOff wait and a requeue for when it ends.
func (p *podPlan) restart(pod *corev1.Pod, c *corev1.Container, init bool, l *attemptObs, now time.Time, bo backoffPolicy) {
	if l.KillReason == killImageChanged {
		p.Start = append(p.Start, startAction{Container: c, Init: init, Restart: l.Restart + 1, Step: 1})
		return
	}
	delay, next := bo.restartDelay(l.BackoffStep, l.Exit.FinishedAt.Sub(l.Exit.StartedAt))
	if wait := l.Exit.FinishedAt.Add(delay).Sub(now); wait > 0 {
		p.Waiting[c.Name] = waitingReason{Reason: reasonCrashLoopBackOff,
			Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.Name, pod.Name, pod.Namespace, pod.UID)}
		if p.RequeueAfter == 0 || wait < p.RequeueAfter {
			p.RequeueAfter = wait
		}
		return
	}
	p.Start = append(p.Start, startAction{Container: c, Init: init, Restart: l.Restart + 1, Step: next})
}

// podWorkDone reports whether nothing of the pod will run again: an init
// container failed under restartPolicy Never, or every regular container
// ended and none will restart.
func podWorkDone(pod *corev1.Pod, obs map[string]containerObs) bool {
	policy := pod.Spec.RestartPolicy
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		l := obs[c.Name].Latest
		if !isSidecar(c) && policy == corev1.RestartPolicyNever && l != nil && l.Exit != nil &&
			l.Exit.ExitCode != 0 && l.KillReason != killImageChanged {
			return true
		}
	}
	if len(pod.Spec.Containers) == 0 {
		return false
	}
	for i := range pod.Spec.Containers {
		l := obs[pod.Spec.Containers[i].Name].Latest
		if l == nil || l.Exit == nil || l.KillReason == killImageChanged {
			return false
		}
		if !killEndsRun(l.KillReason) && restartByPolicy(policy, l.Exit.ExitCode) {
			return false
		}
	}
	return true
}
