package store

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Memory is the store in memory, for tests of its users: the contract of
// StateStore, no durability. Safe for concurrent use.
type Memory struct {
	now func() time.Time

	mu       sync.Mutex
	clusters map[string]SubClusterInfo
	homes    map[string]ApplicationHome
	reserved map[string]string
	policies map[string]PolicyConfiguration
	// timestamps holds each claimed cluster timestamp's sub-cluster.
	timestamps map[int64]string
	// keys is the Routers' delegation token state, keysVersion counts its
	// writes.
	keys        []byte
	keysVersion int
	// tokens are the Routers' token records; writes counts every write
	// of one, so that a version is never given twice.
	tokens map[int32]RouterToken
	writes int
}

var _ StateStore = (*Memory)(nil)

// NewMemory returns an empty store whose heartbeats are stamped with now
// (nil means time.Now).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, clusters: map[string]SubClusterInfo{}, homes: map[string]ApplicationHome{}, reserved: map[string]string{}, policies: map[string]PolicyConfiguration{}, timestamps: map[int64]string{}, tokens: map[int32]RouterToken{}}
}

func (m *Memory) RegisterSubCluster(_ context.Context, info SubClusterInfo) error {
	if err := validateInfo(info); err != nil {
		return fmt.Errorf("federation store: register sub-cluster: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	info.LastHeartBeat = m.now()
	m.clusters[info.ID] = info
	return nil
}

func (m *Memory) SubClusterHeartbeat(_ context.Context, id string, state State, capability string) error {
	if err := validateState(state); err != nil {
		return fmt.Errorf("federation store: heartbeat of %s: %w", id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	info, ok := m.clusters[id]
	if !ok {
		return fmt.Errorf("federation store: heartbeat of sub-cluster %s: %w", id, ErrNotFound)
	}
	info.State, info.Capability, info.LastHeartBeat = state, capability, m.now()
	m.clusters[id] = info
	return nil
}

func (m *Memory) DeregisterSubCluster(_ context.Context, id string, state State) error {
	if err := validateState(state); err != nil {
		return fmt.Errorf("federation store: deregister %s: %w", id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	info, ok := m.clusters[id]
	if !ok {
		return fmt.Errorf("federation store: deregister sub-cluster %s: %w", id, ErrNotFound)
	}
	info.State = state
	m.clusters[id] = info
	return nil
}

func (m *Memory) GetSubCluster(_ context.Context, id string) (SubClusterInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	info, ok := m.clusters[id]
	if !ok {
		return SubClusterInfo{}, fmt.Errorf("federation store: sub-cluster %s: %w", id, ErrNotFound)
	}
	return info, nil
}

func (m *Memory) GetSubClusters(_ context.Context, filterInactive bool) ([]SubClusterInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []SubClusterInfo
	for _, info := range m.clusters {
		if !filterInactive || info.State.Active() {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b SubClusterInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func (m *Memory) ClaimClusterTimestamp(_ context.Context, ts int64, id string) (string, error) {
	if err := validateClaim(ts, id); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if holder, ok := m.timestamps[ts]; ok {
		return holder, nil
	}
	m.timestamps[ts] = id
	return id, nil
}

func (m *Memory) AddApplicationHomeSubCluster(_ context.Context, h ApplicationHome) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if stored, ok := m.homes[h.Application]; ok {
		return stored.Home, nil
	}
	h.CreateTime = m.now()
	m.homes[h.Application] = h
	return h.Home, nil
}

func (m *Memory) UpdateApplicationHomeSubCluster(_ context.Context, h ApplicationHome) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	stored, ok := m.homes[h.Application]
	if !ok {
		return fmt.Errorf("federation store: application %s: %w", h.Application, ErrNotFound)
	}
	stored.Home = h.Home
	m.homes[h.Application] = stored
	return nil
}

func (m *Memory) GetApplicationHomeSubCluster(_ context.Context, application string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.homes[application]
	if !ok {
		return "", fmt.Errorf("federation store: application %s: %w", application, ErrNotFound)
	}
	return h.Home, nil
}

func (m *Memory) GetApplicationsHomeSubCluster(_ context.Context, home string) ([]ApplicationHome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ApplicationHome, 0, len(m.homes))
	for _, h := range m.homes {
		if home == "" || h.Home == home {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b ApplicationHome) int { return cmp.Compare(a.Application, b.Application) })
	return out, nil
}

func (m *Memory) DeleteApplicationHomeSubCluster(_ context.Context, application string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.homes[application]; !ok {
		return fmt.Errorf("federation store: application %s: %w", application, ErrNotFound)
	}
	delete(m.homes, application)
	return nil
}

func (m *Memory) AddReservationHomeSubCluster(_ context.Context, h ReservationHome) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if stored, ok := m.reserved[h.Reservation]; ok {
		return stored, nil
	}
	m.reserved[h.Reservation] = h.Home
	return h.Home, nil
}

func (m *Memory) UpdateReservationHomeSubCluster(_ context.Context, h ReservationHome) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.reserved[h.Reservation]; !ok {
		return fmt.Errorf("federation store: reservation %s: %w", h.Reservation, ErrNotFound)
	}
	m.reserved[h.Reservation] = h.Home
	return nil
}

func (m *Memory) GetReservationHomeSubCluster(_ context.Context, reservation string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	home, ok := m.reserved[reservation]
	if !ok {
		return "", fmt.Errorf("federation store: reservation %s: %w", reservation, ErrNotFound)
	}
	return home, nil
}

func (m *Memory) DeleteReservationHomeSubCluster(_ context.Context, reservation string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.reserved[reservation]; !ok {
		return fmt.Errorf("federation store: reservation %s: %w", reservation, ErrNotFound)
	}
	delete(m.reserved, reservation)
	return nil
}

func (m *Memory) GetPolicyConfiguration(_ context.Context, queue string) (PolicyConfiguration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.policies[queue]
	if !ok {
		return PolicyConfiguration{}, fmt.Errorf("federation store: policy of queue %s: %w", queue, ErrNotFound)
	}
	p.Params = slices.Clone(p.Params)
	return p, nil
}

func (m *Memory) SetPolicyConfiguration(_ context.Context, p PolicyConfiguration) error {
	if p.Queue == "" || p.Type == "" {
		return fmt.Errorf("federation store: set policy: missing queue or type")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p.Params = slices.Clone(p.Params)
	m.policies[p.Queue] = p
	return nil
}

func (m *Memory) GetPoliciesConfigurations(context.Context) ([]PolicyConfiguration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return sortedCopies(m.policies, func(p PolicyConfiguration) PolicyConfiguration {
		p.Params = slices.Clone(p.Params)
		return p
	}, func(a, b PolicyConfiguration) int { return cmp.Compare(a.Queue, b.Queue) }), nil
}

// sortedCopies returns copies (made by clone) of m's values, sorted by
// compare, so that a caller's changes never reach the store.
func sortedCopies[K comparable, V any](m map[K]V, clone func(V) V, compare func(a, b V) int) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, clone(v))
	}
	slices.SortFunc(out, compare)
	return out
}

func (m *Memory) DeletePoliciesConfigurations(_ context.Context, queues []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, q := range queues {
		delete(m.policies, q)
	}
	return nil
}

func (m *Memory) GetRouterKeys(context.Context) ([]byte, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.keys), memoryVersion(m.keysVersion), nil
}

func (m *Memory) PutRouterKeys(_ context.Context, data []byte, version string) (string, error) {
	if len(data) > MaxRouterKeys {
		return "", fmt.Errorf("federation store: router keys of %d bytes, over %d", len(data), MaxRouterKeys)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if stored := memoryVersion(m.keysVersion); version != stored {
		return "", fmt.Errorf("federation store: router keys of version %q, stored %q: %w", version, stored, ErrConflict)
	}
	m.keys = bytes.Clone(data)
	m.keysVersion++
	return memoryVersion(m.keysVersion), nil
}

// memoryVersion is the version of the n-th write; none is "".
func memoryVersion(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func (m *Memory) GetRouterTokens(context.Context) ([]RouterToken, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return sortedCopies(m.tokens, func(t RouterToken) RouterToken {
		t.Data = bytes.Clone(t.Data)
		return t
	}, func(a, b RouterToken) int { return cmp.Compare(a.SequenceNumber, b.SequenceNumber) }), nil
}

func (m *Memory) PutRouterToken(_ context.Context, t RouterToken) (string, error) {
	if len(t.Data) > MaxRouterToken {
		return "", fmt.Errorf("federation store: router token %d of %d bytes, over %d", t.SequenceNumber, len(t.Data), MaxRouterToken)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if stored := m.tokens[t.SequenceNumber].Version; stored != t.Version {
		return "", fmt.Errorf("federation store: router token %d of version %q, stored %q: %w", t.SequenceNumber, t.Version, stored, ErrConflict)
	}
	m.writes++
	t.Version, t.Data = "t"+strconv.Itoa(m.writes), bytes.Clone(t.Data)
	m.tokens[t.SequenceNumber] = t
	return t.Version, nil
}

func (m *Memory) DeleteRouterToken(_ context.Context, seq int32, version string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	stored, ok := m.tokens[seq]
	if !ok {
		return nil
	}
	if stored.Version != version {
		return fmt.Errorf("federation store: delete router token %d of version %q, stored %q: %w", seq, version, stored.Version, ErrConflict)
	}
	delete(m.tokens, seq)
	return nil
}
