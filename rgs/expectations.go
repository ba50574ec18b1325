package rgs

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/knitdev/knit/protocols/yarnid"
)

// podExpectations are RGS's pod writes that the informer has not shown
// yet, as the ReplicaSet controller's ControllerExpectations: pods created
// and not yet in the cache, pods deleted and still in it. A sync reading
// the cache takes them into account: a pod created but unseen is not
// deleted blindly (the scheduler may have bound it meanwhile) and is
// deleted with its application; a pod deleted but still cached is not
// counted by admission. A pod's worker settles its expectation when it
// sees the pod there, or gone; expectationTTL bounds one whose event was
// lost.
type podExpectations struct {
	mu   sync.Mutex
	now  func() time.Time
	adds map[types.NamespacedName]expectedAdd
	dels map[types.NamespacedName]time.Time
}

type expectedAdd struct {
	app yarnid.ApplicationID
	at  time.Time
}

// expectationTTL is the ReplicaSet controller's ExpectationsTimeout.
const expectationTTL = 5 * time.Minute

func newPodExpectations(now func() time.Time) *podExpectations {
	return &podExpectations{now: now, adds: map[types.NamespacedName]expectedAdd{}, dels: map[types.NamespacedName]time.Time{}}
}

// expectCreate: a create of the pod is about to be sent.
func (e *podExpectations) expectCreate(nn types.NamespacedName, app yarnid.ApplicationID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.adds[nn] = expectedAdd{app: app, at: e.now()}
}

// createFailed: the create was refused, nothing is to be seen.
func (e *podExpectations) createFailed(nn types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.adds, nn)
}

// expectDelete: the pod was deleted.
func (e *podExpectations) expectDelete(nn types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dels[nn] = e.now()
}

// observe settles the pod's expectations with what the cache shows: there
// (its create seen) or gone (its create and delete both over). It reports
// whether a create was awaited.
func (e *podExpectations) observe(nn types.NamespacedName, present bool) (created bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, created = e.adds[nn]
	delete(e.adds, nn)
	if !present {
		delete(e.dels, nn)
	}
	return created
}

// unseen reports whether the pod was created and the cache may not show it
// yet.
func (e *podExpectations) unseen(nn types.NamespacedName) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.adds[nn]
	if ok && e.now().Sub(a.at) > expectationTTL {
		delete(e.adds, nn)
		return false
	}
	return ok
}

// deleting reports whether the pod was deleted and the cache may still
// show it.
func (e *podExpectations) deleting(nn types.NamespacedName) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.dels[nn]
	if ok && e.now().Sub(at) > expectationTTL {
		delete(e.dels, nn)
		return false
	}
	return ok
}

// unseenOf are the pods of app created and not yet seen.
func (e *podExpectations) unseenOf(app yarnid.ApplicationID) []types.NamespacedName {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []types.NamespacedName
	for nn, a := range e.adds {
		if a.app == app {
			out = append(out, nn)
		}
	}
	return out
}
