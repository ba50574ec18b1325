package apps

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// Handle applies one event at time now and returns the effects the caller
// must carry out, in order. An event the state of its target (application,
// attempt or container) does not take returns *InvalidTransitionError; an
// event naming an attempt or container the application does not have
// returns an error wrapping ErrUnknownAttempt or ErrUnknownContainer. On any
// error nothing has changed. Events YARN ignores in a state (a kill of a
// finished application) return no effects and no error.
func (a *Application) Handle(ev Event, now time.Time) ([]Effect, error) {
	a.changes++
	a.fx = nil
	var err error
	switch e := ev.(type) {
	case nil:
		err = errors.New("nil event")
	case AttemptEvent:
		err = a.handleAttemptEvent(e, now)
	case ContainerEvent:
		err = a.handleContainerEvent(e, now)
	default:
		err = a.handleAppEvent(ev, now)
	}
	fx := a.fx
	a.fx = nil
	if err != nil {
		// Every check comes before the first change, so an error leaves
		// no half-done transition behind.
		return nil, err
	}
	return fx, nil
}

func (a *Application) emit(fx ...Effect) { a.fx = append(a.fx, fx...) }

func (a *Application) invalid(ev Event) error {
	return &InvalidTransitionError{Object: a.id.String(), State: a.state.String(), Event: ev.Name()}
}

func (a *Application) handleAppEvent(ev Event, now time.Time) error {
	switch e := ev.(type) {
	case Start:
		if a.state == AppStateNew {
			a.start(e)
			return nil
		}
	case Recover:
		if a.state == AppStateNew {
			return a.recover(e, now)
		}
	case AppSaved:
		switch a.state {
		case AppStateNewSaving:
			a.state = AppStateSubmitted
			a.addToScheduler(false)
			return nil
		case AppStateFinalSaving:
			// The first save completing after a kill or reject began the final one.
			return nil
		}
	case AppSaveFailed:
		if a.state == AppStateNewSaving {
			a.diagnostics += e.Diagnostics
			a.end(AppStateFailed, now)
			return nil
		}
	case Accepted:
		switch a.state {
		case AppStateSubmitted:
			a.state = AppStateAccepted
			a.startAttempt(false, now)
			return nil
		case AppStateKilled:
			return nil
		}
	case Rejected:
		switch a.state {
		case AppStateNew, AppStateNewSaving, AppStateSubmitted:
			a.beginFinalSaving(appActEnd, AppStateFailed, AppStateFailed, e.Diagnostics, now)
			return nil
		case AppStateKilled:
			return nil
		}
	case AppFinalSaved:
		switch a.state {
		case AppStateFinalSaving:
			a.finalSaved(now)
			return nil
		case AppStateKilling:
			// An update save (move, priority, launch time) completing.
			return nil
		}
	case Kill:
		a.kill(e.Diagnostics, now)
		return nil
	case TimeoutExpired:
		if a.expiry.IsZero() || now.Before(a.expiry) {
			return nil
		}
		a.kill(DiagLifetimeExceeded, now)
		return nil
	case Move:
		switch a.state {
		case AppStateNewSaving, AppStateSubmitted, AppStateAccepted, AppStateRunning:
			if e.Queue == "" {
				return errors.New("move: empty queue name")
			}
			a.queue = e.Queue
			a.ctx.Queue = proto.String(e.Queue)
			a.emit(PersistApp{Record: a.Record()})
			return nil
		}
	case UpdatePriority:
		switch a.state {
		case AppStateSubmitted, AppStateAccepted, AppStateRunning:
			a.priority = e.Priority
			a.ctx.Priority = &yarnpb.PriorityProto{Priority: proto.Int32(e.Priority)}
			a.emit(PersistApp{Record: a.Record()})
			return nil
		}
	case UpdateTimeout:
		switch a.state {
		case AppStateNewSaving, AppStateSubmitted, AppStateAccepted, AppStateRunning:
			if !e.Expiry.After(now) {
				return fmt.Errorf("%w: expire time %s is not after current time %s", ErrInvalidTimeout,
					formatISO8601(e.Expiry), formatISO8601(now))
			}
			a.expiry = e.Expiry
			a.timerArmed = true
			a.emit(PersistApp{Record: a.Record()}, ScheduleTimeout{App: a.id, Expiry: a.expiry})
			return nil
		}
	}
	return a.invalid(ev)
}

// start stores the new application and arms its lifetime timer
// (RMAppNewlySavingTransition).
func (a *Application) start(e Start) {
	life := a.lifetime
	switch {
	case life <= 0:
		life = e.DefaultLifetime
	case e.MaxLifetime > 0 && life > e.MaxLifetime:
		life = e.MaxLifetime
	}
	if life > 0 {
		a.expiry = a.submitTime.Add(life)
	}
	a.state = AppStateNewSaving
	a.emit(PersistApp{Record: a.Record(), Done: AppSaved{}})
	if life > 0 {
		a.timerArmed = true
		a.emit(ScheduleTimeout{App: a.id, Expiry: a.expiry})
	}
}

func (a *Application) addToScheduler(recovering bool) {
	a.addedToScheduler = true
	a.emit(AddToScheduler{App: a.id, User: a.user, Queue: a.queue, Priority: a.priority, Recovering: recovering})
}

// kill is the KILL event, valid in every state.
func (a *Application) kill(diag string, now time.Time) {
	switch a.state {
	case AppStateNew:
		a.diagnostics += diag
		a.end(AppStateKilled, now)
	case AppStateNewSaving, AppStateSubmitted:
		a.beginFinalSaving(appActEnd, AppStateKilled, AppStateKilled, diag, now)
	case AppStateAccepted, AppStateRunning:
		// The attempt ends first; its ATTEMPT_KILLED brings the diagnostics back.
		a.beforeKilling = a.state
		a.state = AppStateKilling
		a.killAttempt(a.CurrentAttempt(), diag, now)
	}
	// FINAL_SAVING, FINISHING, KILLING and the end states ignore it.
}

// beginFinalSaving stores the final state before the application reaches it
// (YARN's FinalSavingTransition), so that a restart never brings back an
// application a client was told had ended.
func (a *Application) beginFinalSaving(act appAction, target, stored AppState, diag string, now time.Time) {
	a.pending = appPending{action: act, target: target, diag: diag}
	a.beforeFinalSaving = a.state
	a.storedFinishTime = now
	a.state = AppStateFinalSaving
	a.emit(PersistApp{Record: a.record(stored, a.diagnostics+diag), Done: AppFinalSaved{}})
}

func (a *Application) finalSaved(now time.Time) {
	a.cancelTimer()
	p := a.pending
	a.pending = appPending{}
	switch p.action {
	case appActUnregistered:
		a.finishTime = a.storedFinishTime
		a.state = AppStateFinishing
	case appActAttemptFinished:
		a.finishTime = a.storedFinishTime
		a.diagnostics += p.diag
		a.end(AppStateFinished, now)
	default:
		a.diagnostics += p.diag
		a.end(p.target, now)
	}
}

// end moves the application to an end state (YARN's FinalTransition).
func (a *Application) end(state AppState, now time.Time) {
	a.finishTime = a.storedFinishTime
	if a.finishTime.IsZero() {
		a.finishTime = now
	}
	a.cancelTimer()
	a.state = state
	if a.recoveredFinal == 0 && a.addedToScheduler {
		// Applications recovered as ended were never given to the scheduler.
		a.emit(RemoveFromScheduler{App: a.id, State: state})
	}
	a.emit(AppCompleted{App: a.id, State: state})
}

func (a *Application) cancelTimer() {
	if a.timerArmed {
		a.timerArmed = false
		a.emit(CancelTimeout{App: a.id})
	}
}

// startAttempt creates the next attempt and starts it (YARN's
// createAndStartNewAttempt and AttemptStartedTransition).
func (a *Application) startAttempt(transfer bool, now time.Time) {
	prev := a.CurrentAttempt()
	t := newAttempt(AttemptID{App: a.id, ID: a.nextAttempt}, a.unmanaged, a.proxyURL())
	a.nextAttempt++
	a.attempts = append(a.attempts, t)
	if transfer && prev != nil {
		for _, id := range a.order {
			if c := a.containers[id]; c.holder == prev.id && c.state.live() {
				h := c.hold()
				c.holder = t.id
				a.rehold(h, c.hold())
			}
		}
	}
	t.start = now
	t.state = AttemptStateSubmitted
	a.emit(AddAttemptToScheduler{Attempt: t.id, TransferState: transfer})
}

// --- what attempts tell the application (RMAppEventType ATTEMPT_*) ---

func (a *Application) onAttemptLaunched(now time.Time) {
	if a.state == AppStateAccepted {
		a.launchTime = now
		a.emit(PersistApp{Record: a.Record()})
	}
}

func (a *Application) onAttemptRegistered() {
	if a.state == AppStateAccepted {
		a.state = AppStateRunning
	}
}

func (a *Application) onAttemptUnregistered(now time.Time) {
	switch a.state {
	case AppStateRunning, AppStateKilling:
		a.beginFinalSaving(appActUnregistered, AppStateFinishing, AppStateFinished, "", now)
	}
}

func (a *Application) onAttemptFinished(diag string, now time.Time) {
	switch a.state {
	case AppStateAccepted:
		a.beginFinalSaving(appActEnd, AppStateFinished, AppStateFinished, diag, now)
	case AppStateRunning, AppStateKilling, AppStateFinishing:
		a.diagnostics += diag
		a.end(AppStateFinished, now)
	case AppStateFinalSaving:
		if a.pending.target == AppStateFailed || a.pending.target == AppStateKilled {
			return
		}
		a.pending = appPending{action: appActAttemptFinished, target: AppStateFinished, diag: diag}
	}
}

func (a *Application) onAttemptKilled(diag string, now time.Time) {
	switch a.state {
	case AppStateAccepted, AppStateKilling:
		a.beginFinalSaving(appActEnd, AppStateKilled, AppStateKilled, diag, now)
	}
}

func (a *Application) onAttemptFailed(diag string, keep bool, now time.Time) {
	switch a.state {
	case AppStateAccepted, AppStateRunning:
		a.attemptFailed(diag, keep, AppStateAccepted, now)
	case AppStateKilling:
		a.attemptFailed(diag, keep, AppStateKilling, now)
	}
}

// attemptFailed starts a new attempt while attempts remain, else fails the
// application (YARN's AttemptFailedTransition).
func (a *Application) attemptFailed(diag string, keep bool, back AppState, now time.Time) {
	n := a.failedAttempts(now)
	if a.maxAttempts == 1 {
		// A user who asked for one attempt may not cope with a second,
		// whatever the reason for the first failure.
		n = a.maxAttempts
	} else if a.validity > 0 {
		a.forgetOldAttempts(now)
	}
	if !a.unmanaged && n < a.maxAttempts {
		if back == AppStateKilling {
			a.beginFinalSaving(appActEnd, AppStateKilled, AppStateKilled, diag, now)
			return
		}
		a.startAttempt(keep, now)
		a.state = back
		return
	}
	if n >= a.maxAttempts {
		a.beyondThreshold = true
	}
	a.beginFinalSaving(appActEnd, AppStateFailed, AppStateFailed, a.failedDiagnostics(diag), now)
}

func (a *Application) failedDiagnostics(diag string) string {
	if a.unmanaged {
		return fmt.Sprintf("Unmanaged application %s failed due to %s. Failing the application.", a.id, diag)
	}
	var within, limits string
	if a.validity > 0 {
		within = fmt.Sprintf(" in previous %d milliseconds", a.validity.Milliseconds())
	}
	if a.cfg.MaxAppAttempts != a.maxAttempts {
		limits = fmt.Sprintf(" (global limit =%d; local limit is =%d)", a.cfg.MaxAppAttempts, a.maxAttempts)
	}
	return fmt.Sprintf("Application %s failed %d times%s%s due to %s. Failing the application.",
		a.id, a.maxAttempts, within, limits, diag)
}

// failedAttempts counts the attempts whose failure counts against
// MaxAttempts: not preempted, aborted, lost to failed disks or killed by
// the RM, and within the validity interval.
func (a *Application) failedAttempts(now time.Time) int32 {
	var n int32
	for _, t := range a.attempts {
		if a.counts(t, now) {
			n++
		}
	}
	return n
}

func (a *Application) counts(t *Attempt, now time.Time) bool {
	if a.validity > 0 && !t.finish.IsZero() && t.finish.Before(now.Add(-a.validity)) {
		return false
	}
	switch t.amExitStatus {
	case ExitPreempted, ExitAborted, ExitDisksFailed, ExitKilledByResourceManager:
		return false
	}
	return true
}

// forgetOldAttempts deletes the stored records of attempts whose failures no
// longer count, keeping MaxAttempts of them (YARN's removeExcessAttempts).
func (a *Application) forgetOldAttempts(now time.Time) {
	for a.nextAttempt-a.firstStoredAttempt > a.maxAttempts {
		t := a.Attempt(AttemptID{App: a.id, ID: a.firstStoredAttempt})
		if t == nil || !t.finish.Before(now.Add(-a.validity)) {
			return
		}
		a.firstStoredAttempt++
		a.emit(RemoveAttemptRecord{Attempt: t.id})
	}
}

// --- recovery ---

// recover rebuilds the application from its records (YARN's
// RMAppRecoveredTransition): an ended application goes straight to its end
// state, one without attempts back to SUBMITTED, any other to ACCEPTED with
// its last attempt waiting for the AM to re-register or its container to end.
func (a *Application) recover(e Recover, now time.Time) error {
	r := e.App
	if r.ID != a.id {
		return fmt.Errorf("%w: record of %s given to %s", ErrInvalidRecord, r.ID, a.id)
	}
	if r.State != 0 && !r.State.Final() {
		return fmt.Errorf("%w: %s stored in state %s", ErrInvalidRecord, a.id, r.State)
	}
	recs := slices.Clone(e.Attempts)
	slices.SortFunc(recs, func(x, y AttemptRecord) int { return int(x.ID.ID) - int(y.ID.ID) })
	for i, ar := range recs {
		switch {
		case ar.ID.App != a.id || ar.ID.ID <= 0:
			return fmt.Errorf("%w: attempt record %s given to %s", ErrInvalidRecord, ar.ID, a.id)
		case i > 0 && recs[i-1].ID == ar.ID:
			return fmt.Errorf("%w: attempt %s stored twice", ErrInvalidRecord, ar.ID)
		case ar.State != 0 && !ar.State.Final():
			return fmt.Errorf("%w: %s stored in state %s", ErrInvalidRecord, ar.ID, ar.State)
		}
	}

	a.diagnostics = r.Diagnostics
	a.storedFinishTime = r.FinishTime
	if !r.StartTime.IsZero() {
		a.startTime = r.StartTime
	}
	a.launchTime = r.LaunchTime
	a.expiry = r.LifetimeExpiry
	a.recoveredFinal = r.State
	if len(recs) > 0 {
		a.firstStoredAttempt = recs[0].ID.ID
	}
	var prev *Attempt
	for _, ar := range recs {
		t := newAttempt(ar.ID, a.unmanaged, a.proxyURL())
		t.applyRecord(ar)
		a.usage.add(ar.Usage)
		if prev != nil && prev.recoveredFinal == 0 {
			// An attempt before the last one whose end was never stored
			// cannot be running: count it failed.
			prev.recoveredFinal = AttemptStateFailed
		}
		a.attempts = append(a.attempts, t)
		a.nextAttempt = ar.ID.ID + 1
		prev = t
	}

	if r.State != 0 {
		for _, t := range a.attempts {
			a.recoverAttempt(t, now)
		}
		a.end(r.State, now)
		return nil
	}
	if !a.expiry.IsZero() {
		a.timerArmed = true
		a.emit(ScheduleTimeout{App: a.id, Expiry: a.expiry})
	}
	if len(a.attempts) == 0 {
		a.state = AppStateSubmitted
		a.addToScheduler(false)
		return nil
	}
	// Saving the first attempt implies the application was accepted.
	a.state = AppStateAccepted
	a.addToScheduler(true)
	for _, t := range a.attempts {
		a.recoverAttempt(t, now)
	}
	return nil
}

// recoverAttempt is YARN's AttemptRecoveredTransition.
func (a *Application) recoverAttempt(t *Attempt, now time.Time) {
	current := t == a.CurrentAttempt()
	if t.recoveredFinal != 0 {
		t.progress = 1
		if current && a.recoveredFinal == 0 {
			// Replay the end of the last attempt so the application
			// decides again: retry, or end.
			a.emit(AddAttemptToScheduler{Attempt: t.id, Recovering: true})
			a.attemptEnded(t, t.recoveredFinal, "", now)
			return
		}
		t.state = t.recoveredFinal
		return
	}
	switch a.recoveredFinal {
	case AppStateFinished:
		t.state = AttemptStateFinished
		return
	case AppStateFailed:
		t.state = AttemptStateFailed
		return
	case AppStateKilled:
		t.state = AttemptStateKilled
		return
	}
	a.emit(AddAttemptToScheduler{Attempt: t.id, Recovering: true})
	t.state = AttemptStateLaunched
	a.amLaunched(t, false, now)
}
