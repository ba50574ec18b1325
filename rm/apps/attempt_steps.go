package apps

import (
	"fmt"
	"strconv"
	"time"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// handleAttemptEvent runs one event of an attempt (YARN's RMAppAttemptImpl
// state table). Each case checks everything before it changes anything.
func (a *Application) handleAttemptEvent(ev AttemptEvent, now time.Time) error {
	id := ev.AttemptID()
	t := a.Attempt(id)
	if t == nil {
		return fmt.Errorf("%w: %s in %s", ErrUnknownAttempt, id, a.id)
	}
	// The state the event found, for the error of an event it refuses; the
	// error itself is made only then, not for every heartbeat's update.
	from := t.state

	switch e := ev.(type) {
	case AttemptAdded:
		switch t.state {
		case AttemptStateSubmitted:
			if t.unmanaged {
				t.state = AttemptStateLaunchedUnmanagedSaving
				a.emit(PersistAttempt{Record: t.Record(), Done: AttemptSaved{Attempt: id}})
				return nil
			}
			t.state = AttemptStateScheduled
			t.launchDiagnostics = schedulerNote(now, diagAMActivated)
			a.emit(RequestAMContainer{Attempt: id, Requests: a.AMRequests()})
			return nil
		case AttemptStateKilled:
			return nil
		}

	case AMContainerAllocated:
		cid, err := containerIDOf(e.Container)
		if err != nil {
			return fmt.Errorf("AM container for %s: %w", id, err)
		}
		switch t.state {
		case AttemptStateScheduled:
			if cid.Attempt != id {
				return fmt.Errorf("AM container %s allocated to %s", cid, id)
			}
			if a.containers[cid] != nil {
				return &InvalidTransitionError{Object: cid.String(), State: a.containers[cid].state.String(), Event: ContainerAllocated{}.Name()}
			}
			c, err := NewContainer(e.Container, a.user, now)
			if err != nil {
				return err
			}
			c.am, c.partition = true, e.Partition
			t.amContainer = c.Proto()
			t.launchDiagnostics = schedulerNote(now, diagAMAssigned)
			t.state = AttemptStateAllocatedSaving
			a.emit(PersistAttempt{Record: t.Record(), Done: AttemptSaved{Attempt: id}})
			// The RM itself pulls the AM container from the scheduler.
			c.state = ContainerStateAcquired
			a.addContainer(c)
			a.emit(WatchAllocation{Container: cid})
			return nil
		case AttemptStateRunning, AttemptStateFinalSaving, AttemptStateFinishing, AttemptStateFinished, AttemptStateFailed, AttemptStateKilled:
			// Too late: nobody will launch it. YARN's scheduler takes such
			// a container back; here its bound pod must go.
			if am, ok := t.amContainerID(); !ok || am != cid {
				a.emit(StopContainer{Container: cid, Node: e.Container.GetNodeId()})
			}
			return nil
		}

	case AttemptSaved:
		switch t.state {
		case AttemptStateAllocatedSaving:
			t.state = AttemptStateAllocated
			a.emit(LaunchAM{Attempt: id, Container: t.AMContainer()})
			return nil
		case AttemptStateLaunchedUnmanagedSaving:
			t.state = AttemptStateLaunched
			a.emit(IssueAMRMToken{Attempt: id})
			a.amLaunched(t, false, now)
			return nil
		case AttemptStateFinalSaving:
			return nil
		}

	case AttemptLaunched:
		switch t.state {
		case AttemptStateAllocated:
			t.state = AttemptStateLaunched
			a.amLaunched(t, true, now)
			return nil
		case AttemptStateRunning, AttemptStateFinalSaving, AttemptStateFailed, AttemptStateFinishing, AttemptStateFinished, AttemptStateKilled:
			return nil
		}

	case AttemptLaunchFailed:
		switch t.state {
		case AttemptStateAllocated:
			a.beginAttemptFinalSaving(t, AttemptStateFailed, false, attemptCause{kind: causeLaunchFailed, diag: e.Diagnostics}, now)
			return nil
		case AttemptStateFinalSaving, AttemptStateKilled:
			return nil
		}

	case AttemptRegistered:
		switch t.state {
		case AttemptStateAllocated, AttemptStateLaunched:
			if t.state != AttemptStateLaunched {
				// The AM registered before the launcher reported back.
				a.amLaunched(t, true, now)
			}
			t.host = e.Host
			t.rpcPort = e.RPCPort
			t.originalURL = sanitizeURL(e.TrackingURL)
			t.launchDiagnostics = ""
			t.state = AttemptStateRunning
			a.onAttemptRegistered()
			return nil
		case AttemptStateSubmitted, AttemptStateLaunchedUnmanagedSaving:
			// Only an unmanaged AM can register this early, and must not.
			a.beginAttemptFinalSaving(t, AttemptStateFailed, false, attemptCause{kind: causeUnexpectedRegister, diag: diagUnexpectedAM}, now)
			return nil
		case AttemptStateRunning, AttemptStateKilled:
			// A re-registration (unmanaged AM restart), or too late.
			return nil
		}

	case AttemptStatusUpdate:
		switch t.state {
		case AttemptStateRunning:
			t.progress = clampProgress(e.Progress)
			return nil
		case AttemptStateFinalSaving, AttemptStateFailed, AttemptStateFinishing, AttemptStateKilled:
			return nil
		}

	case AttemptUnregistered:
		switch t.state {
		case AttemptStateRunning:
			// An unmanaged AM has no container to wait for: it goes
			// straight to FINISHED once saved.
			target := AttemptStateFinishing
			if t.unmanaged {
				target = AttemptStateFinished
			}
			a.beginAttemptFinalSaving(t, target, true, attemptCause{kind: causeUnregister, unregister: e}, now)
			a.onAttemptUnregistered(now)
			return nil
		case AttemptStateFinalSaving, AttemptStateFailed, AttemptStateFinishing, AttemptStateFinished, AttemptStateKilled:
			return nil
		}

	case AttemptExpired:
		switch t.state {
		case AttemptStateLaunched, AttemptStateRunning:
			a.beginAttemptFinalSaving(t, AttemptStateFailed, true, attemptCause{kind: causeExpire, diag: expiredDiagnostics(id)}, now)
			return nil
		case AttemptStateFinalSaving:
			a.amGoneWhileSaving(t)
			return nil
		case AttemptStateFinishing:
			t.progress = 1
			a.attemptEnded(t, AttemptStateFinished, "", now)
			return nil
		case AttemptStateFailed, AttemptStateFinished, AttemptStateKilled:
			return nil
		}

	case AttemptFailed:
		switch t.state {
		case AttemptStateSubmitted, AttemptStateScheduled, AttemptStateAllocatedSaving, AttemptStateLaunchedUnmanagedSaving,
			AttemptStateAllocated, AttemptStateLaunched, AttemptStateRunning:
			a.beginAttemptFinalSaving(t, AttemptStateFailed, false, attemptCause{kind: causeFail, diag: e.Diagnostics}, now)
			return nil
		case AttemptStateFinalSaving, AttemptStateFailed, AttemptStateFinishing, AttemptStateFinished, AttemptStateKilled:
			return nil
		}

	case AttemptFinalSaved:
		if t.state == AttemptStateFinalSaving {
			a.attemptFinalSaved(t, now)
			return nil
		}

	case AttemptDiagnostics:
		switch t.state {
		case AttemptStateSubmitted, AttemptStateScheduled, AttemptStateAllocatedSaving, AttemptStateAllocated, AttemptStateLaunched:
			t.launchDiagnostics = e.Message
		}
		return nil
	}
	return &InvalidTransitionError{Object: id.String(), State: from.String(), Event: ev.Name()}
}

// amLaunched is YARN's AMLaunchedTransition. app is set when the launch is
// news to the application (LAUNCHED, or REGISTERED before it), not when an
// unmanaged AM's attempt was saved or an attempt is recovered.
func (a *Application) amLaunched(t *Attempt, app bool, now time.Time) {
	t.launchDiagnostics = diagAMLaunched
	a.emit(WatchAM{Attempt: t.id, Monitor: AMLiveness})
	if app {
		a.onAttemptLaunched(now)
	}
}

// killAttempt sends KILL to an attempt.
func (a *Application) killAttempt(t *Attempt, diag string, now time.Time) {
	if t == nil {
		return
	}
	cause := attemptCause{kind: causeKill, diag: diag}
	switch t.state {
	case AttemptStateNew, AttemptStateSubmitted, AttemptStateScheduled, AttemptStateAllocatedSaving, AttemptStateLaunchedUnmanagedSaving, AttemptStateAllocated:
		a.beginAttemptFinalSaving(t, AttemptStateKilled, false, cause, now)
	case AttemptStateLaunched, AttemptStateRunning:
		a.beginAttemptFinalSaving(t, AttemptStateKilled, true, cause, now)
	}
	// An attempt already ending ignores the kill; the application learns
	// of its end as usual.
}

// amContainerEnded tells an attempt its AM container has ended (YARN's
// CONTAINER_FINISHED for the master container).
func (a *Application) amContainerEnded(t *Attempt, exit int32, diag string, now time.Time) {
	cause := attemptCause{kind: causeAMExit, exit: exit, diag: diag}
	switch t.state {
	case AttemptStateAllocatedSaving, AttemptStateAllocated, AttemptStateLaunched:
		a.beginAttemptFinalSaving(t, AttemptStateFailed, false, cause, now)
	case AttemptStateRunning:
		a.beginAttemptFinalSaving(t, AttemptStateFailed, true, cause, now)
	case AttemptStateFinalSaving:
		a.amGoneWhileSaving(t)
	case AttemptStateFinishing:
		t.progress = 1
		a.attemptEnded(t, AttemptStateFinished, "", now)
	}
}

// amGoneWhileSaving handles the AM's end (container exit or expiry) while
// its unregistration is being saved: once saved, the attempt goes straight
// to FINISHED. An attempt already on its way to FAILED or KILLED stays so.
func (a *Application) amGoneWhileSaving(t *Attempt) {
	if t.pending.target == AttemptStateFinishing {
		t.pending.target = AttemptStateFinished
	}
}

// beginAttemptFinalSaving stores the attempt's final state before it is
// reached (YARN's rememberTargetTransitionsAndStoreState).
func (a *Application) beginAttemptFinalSaving(t *Attempt, target AttemptState, progress bool, cause attemptCause, now time.Time) {
	stored := target
	if target == AttemptStateFinishing {
		stored = AttemptStateFinished
	}
	t.pending = attemptPending{target: target, cause: cause, progress: progress}
	t.beforeFinalSaving = t.state

	// Never leave the tracking URL pointing at an AM that is gone.
	t.originalURL = a.rmAppPage()
	if stored == AttemptStateFailed || stored == AttemptStateKilled {
		t.proxiedURL = t.originalURL
	}
	rec := t.Record()
	rec.State = stored
	rec.FinalTrackingURL = t.originalURL
	switch cause.kind {
	case causeUnregister:
		u := cause.unregister
		rec.Diagnostics += u.Diagnostics
		rec.FinalTrackingURL = sanitizeURL(u.TrackingURL)
		rec.FinalStatus = u.FinalStatus.Enum()
	case causeAMExit:
		t.pending.cause.diag = a.amCrashDiagnostics(t, cause.exit, cause.diag)
		rec.Diagnostics += t.pending.cause.diag
		rec.AMContainerExitStatus = cause.exit
	case causeKill:
		// The kill's text goes to the application, not the attempt.
	default:
		rec.Diagnostics += cause.diag
	}
	t.finish = now
	rec.FinishTime = now
	t.state = AttemptStateFinalSaving
	a.emit(PersistAttempt{Record: rec, Done: AttemptFinalSaved{Attempt: t.id}})
}

// attemptFinalSaved runs what beginAttemptFinalSaving remembered (YARN's
// FinalStateSavedTransition).
func (a *Application) attemptFinalSaved(t *Attempt, now time.Time) {
	p := t.pending
	t.pending = attemptPending{}
	switch p.target {
	case AttemptStateFinishing:
		t.updateOnUnregister(p.cause.unregister)
		t.state = AttemptStateFinishing
		a.emit(WatchAM{Attempt: t.id, Monitor: AMFinishing})
	case AttemptStateFinished:
		t.updateOnUnregister(p.cause.unregister)
		t.progress = 1
		a.attemptEnded(t, AttemptStateFinished, "", now)
	default:
		if p.cause.kind != causeKill {
			t.appendDiagnostics(p.cause.diag)
		}
		if p.cause.kind == causeAMExit {
			t.amExitStatus = p.cause.exit
		}
		if p.progress {
			t.progress = 1
		}
		killDiag := ""
		if p.cause.kind == causeKill {
			killDiag = p.cause.diag
		}
		a.attemptEnded(t, p.target, killDiag, now)
	}
}

// attemptEnded moves an attempt to an end state and tells the scheduler and
// the application (YARN's BaseFinalTransition).
func (a *Application) attemptEnded(t *Attempt, final AttemptState, killDiag string, now time.Time) {
	t.state = final
	keep := false
	if final == AttemptStateFailed || final == AttemptStateKilled {
		t.invalidateAMAddress()
	}
	if final == AttemptStateFailed && a.keepContainers && !a.unmanaged && a.failedAttempts(now) < a.maxAttempts {
		keep = true
	}
	a.endContainersOf(t, keep, now)
	a.emit(ReleaseAttempt{Attempt: t.id, State: final, KeepContainers: keep})
	switch final {
	case AttemptStateFinished:
		a.onAttemptFinished(t.Diagnostics(), now)
	case AttemptStateKilled:
		a.onAttemptKilled(killDiag, now)
	case AttemptStateFailed:
		a.onAttemptFailed(t.Diagnostics(), keep, now)
	}
}

// endContainersOf ends the containers an ended attempt still holds, as the
// scheduler's doneApplicationAttempt does; running task containers survive
// when the next attempt keeps them.
func (a *Application) endContainersOf(t *Attempt, keep bool, now time.Time) {
	for _, id := range a.order {
		c := a.containers[id]
		if c.holder != t.id || c.state.Final() {
			continue
		}
		if keep && c.state == ContainerStateRunning && !c.am {
			continue
		}
		a.stepContainer(c, ContainerKilled{Container: id, ExitStatus: ExitAborted, Diagnostics: DiagCompletedApplication}, now)
	}
}

func (a *Application) amCrashDiagnostics(t *Attempt, exit int32, diag string) string {
	// Word for word RMAppAttemptImpl.getAMContainerCrashedDiagnostics,
	// double space included: users search logs for it.
	return "AM Container for " + t.id.String() + " exited with " + " exitCode: " + strconv.Itoa(int(exit)) + "\n" +
		"Failing this attempt." + "Diagnostics: " + diag +
		"For more detailed output, check the application tracking page: " + t.TrackingURL() +
		" Then click on links to logs of each attempt.\n"
}

func expiredDiagnostics(id AttemptID) string {
	return "ApplicationMaster for attempt " + id.String() + " timed out"
}

// --- containers ---

func (a *Application) handleContainerEvent(ev ContainerEvent, now time.Time) error {
	switch e := ev.(type) {
	case ContainerAllocated:
		return a.containerArrived(e.Container, e.Partition, ev, now)
	case ContainerReserved:
		return a.containerArrived(e.Container, "", ev, now)
	case ContainerRecovered:
		return a.recoverContainer(e, now)
	}
	id := ev.ContainerID()
	c := a.containers[id]
	if c == nil {
		return fmt.Errorf("%w: %s in %s", ErrUnknownContainer, id, a.id)
	}
	return a.stepContainer(c, ev, now)
}

// stepContainer runs one container event and, if the container has just
// ended, accounts its usage and tells its attempt when it was the AM's.
func (a *Application) stepContainer(c *Container, ev ContainerEvent, now time.Time) error {
	h := c.hold()
	ended, fx, err := c.step(ev, now)
	a.rehold(h, c.hold())
	if err != nil {
		return err
	}
	a.emit(fx...)
	if ended {
		a.containerEnded(c, now)
	}
	return nil
}

func (a *Application) containerEnded(c *Container, now time.Time) {
	u := c.Usage(now)
	a.usage.add(u)
	// YARN books the usage to the current attempt, whichever allocated it.
	if t := a.CurrentAttempt(); t != nil {
		t.usage.add(u)
	}
	if !c.am {
		return
	}
	if t := a.Attempt(c.id.Attempt); t != nil {
		a.amContainerEnded(t, c.exit, c.diag, now)
	}
}

// containerArrived handles an allocation or reservation: of a new container
// for the current attempt, or of one already reserved, in partition.
func (a *Application) containerArrived(p *yarnpb.ContainerProto, partition string, ev ContainerEvent, now time.Time) error {
	id, err := containerIDOf(p)
	if err != nil {
		return fmt.Errorf("%s for %s: %w", ev.Name(), a.id, err)
	}
	if c := a.containers[id]; c != nil {
		if _, ok := ev.(ContainerAllocated); ok && c.state == ContainerStateReserved {
			// A reservation turned into the container takes its
			// partition, whose holding moves with it.
			h := c.hold()
			c.partition = partition
			a.rehold(h, c.hold())
		}
		return a.stepContainer(c, ev, now)
	}
	t := a.Attempt(id.Attempt)
	if t == nil {
		return fmt.Errorf("%w: %s of container %s in %s", ErrUnknownAttempt, id.Attempt, id, a.id)
	}
	if t != a.CurrentAttempt() || !t.takesContainers() {
		return &InvalidTransitionError{Object: t.id.String(), State: t.state.String(), Event: ev.Name()}
	}
	c, err := NewContainer(p, a.user, now)
	if err != nil {
		return err
	}
	c.partition = partition
	if _, fx, err := c.step(ev, now); err != nil {
		return err
	} else {
		a.emit(fx...)
	}
	a.addContainer(c)
	return nil
}

// recoverContainer rebuilds a container found after a restart (YARN's
// ContainerRecoveredTransition).
func (a *Application) recoverContainer(e ContainerRecovered, now time.Time) error {
	id, err := containerIDOf(e.Container)
	if err != nil {
		return fmt.Errorf("%s for %s: %w", e.Name(), a.id, err)
	}
	if c := a.containers[id]; c != nil {
		return &InvalidTransitionError{Object: id.String(), State: c.state.String(), Event: e.Name()}
	}
	t := a.Attempt(id.Attempt)
	if t == nil {
		return fmt.Errorf("%w: %s of container %s in %s", ErrUnknownAttempt, id.Attempt, id, a.id)
	}
	created := e.Created
	if created.IsZero() {
		created = now
	}
	c, err := NewContainer(e.Container, a.user, created)
	if err != nil {
		return err
	}
	c.partition = e.Partition
	if am, ok := t.amContainerID(); ok && am == id {
		c.am = true
	}
	if cur := a.CurrentAttempt(); a.keepContainers && !c.am && cur != nil {
		c.holder = cur.id
	}
	c.state = ContainerStateRunning
	if !e.Running {
		fx := c.end(ContainerStateCompleted, e.ExitStatus, e.Diagnostics, false, now)
		a.addContainer(c)
		a.emit(fx...)
		a.containerEnded(c, now)
		return nil
	}
	a.addContainer(c)
	if h := a.Attempt(c.holder); h == nil || h.state.Final() {
		// Nobody will use it: the attempt holding it has ended.
		return a.stepContainer(c, ContainerKilled{Container: id, ExitStatus: ExitAborted, Diagnostics: DiagCompletedApplication}, now)
	}
	return nil
}

// addContainer takes a new container in, in the state it has reached.
func (a *Application) addContainer(c *Container) {
	a.containers[c.id] = c
	a.order = append(a.order, c.id)
	a.rehold(hold{}, c.hold())
}
