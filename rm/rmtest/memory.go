package rmtest

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/knitdev/knit/rgs/nodes"

	"github.com/knitdev/knit/rm"
)

// MemoryStore is an rm.AppStore that keeps its records in this process only,
// like YARN's MemoryRMStateStore: an RM on it forgets everything when it
// stops.
type MemoryStore struct {
	mu   sync.Mutex
	apps map[string]rm.StoredApp
}

var (
	_ rm.AppStore   = (*MemoryStore)(nil)
	_ rm.IDSource   = (*MemoryIDs)(nil)
	_ rm.NodeLister = NodeList(nil)
)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{apps: map[string]rm.StoredApp{}} }

// Put implements rm.AppStore.
func (s *MemoryStore) Put(_ context.Context, id, state, user, queue string, finish time.Time, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps[id] = rm.StoredApp{ID: id, State: state, User: user, Queue: queue, FinishTime: finish, Data: append([]byte(nil), data...)}
	return nil
}

// Delete implements rm.AppStore.
func (s *MemoryStore) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.apps, id)
	return nil
}

// List implements rm.AppStore, in id order.
func (s *MemoryStore) List(context.Context) ([]rm.StoredApp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]rm.StoredApp, 0, len(s.apps))
	for _, a := range s.apps {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Get returns the record of application id, if there is one.
func (s *MemoryStore) Get(id string) (rm.StoredApp, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.apps[id]
	return a, ok
}

// MemoryIDs is an rm.IDSource counting from 1 under a fixed cluster
// timestamp. Its counter outlives the ResourceManagers that share it, as a
// persisted one does.
type MemoryIDs struct {
	ClusterTimestamp int64

	mu  sync.Mutex
	seq int32
}

// Next implements rm.IDSource.
func (m *MemoryIDs) Next(context.Context) (int64, int32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	return m.ClusterTimestamp, m.seq, nil
}

// NodeList is an rm.NodeLister with a fixed set of nodes.
type NodeList []rm.NodeInfo

// Nodes implements rm.NodeLister.
func (n NodeList) Nodes(context.Context) ([]rm.NodeInfo, error) { return n, nil }

// Census implements rm.NodeLister.
func (n NodeList) Census(context.Context) (rm.NodeCensus, error) { return nodes.CensusOf(n), nil }
