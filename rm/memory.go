package rm

import (
	"context"
	"sort"
	"sync"
	"time"
)

// MemoryStore is an AppStore that keeps its records in this process only,
// like YARN's MemoryRMStateStore: an RM on it forgets everything when it
// stops. Tests, benchmarks and RMs run without recovery use it.
type MemoryStore struct {
	mu   sync.Mutex
	apps map[string]StoredApp
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{apps: map[string]StoredApp{}} }

// Put implements AppStore.
func (s *MemoryStore) Put(_ context.Context, id, state, user, queue string, finish time.Time, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps[id] = StoredApp{ID: id, State: state, User: user, Queue: queue, FinishTime: finish, Data: append([]byte(nil), data...)}
	return nil
}

// Delete implements AppStore.
func (s *MemoryStore) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.apps, id)
	return nil
}

// List implements AppStore, in id order.
func (s *MemoryStore) List(context.Context) ([]StoredApp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]StoredApp, 0, len(s.apps))
	for _, a := range s.apps {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Get returns the record of application id, if there is one.
func (s *MemoryStore) Get(id string) (StoredApp, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.apps[id]
	return a, ok
}

// MemoryIDs is an IDSource counting from 1 under a fixed cluster
// timestamp. Its counter outlives the ResourceManagers that share it, as a
// persisted one does.
type MemoryIDs struct {
	ClusterTimestamp int64

	mu  sync.Mutex
	seq int32
}

// Next implements IDSource.
func (m *MemoryIDs) Next(context.Context) (int64, int32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	return m.ClusterTimestamp, m.seq, nil
}

// NodeList is a NodeLister with a fixed set of nodes.
type NodeList []NodeInfo

// Nodes implements NodeLister.
func (n NodeList) Nodes(context.Context) ([]NodeInfo, error) { return n, nil }
