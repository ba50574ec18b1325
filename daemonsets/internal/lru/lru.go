package lru

import (
	"container/list"
	"context"
	"sync"
)

// Cache keeps values within a byte bound, least recently used out first.
// Its methods are safe for concurrent use.
type Cache[K comparable, V any] struct {
	max int64

	mu      sync.Mutex
	used    int64
	entries map[K]*entry[K, V]
	lru     *list.List // of *entry, most recent at the front
}

// entry is a kept value, or one being loaded (ready still open).
type entry[K comparable, V any] struct {
	key   K
	val   V
	size  int64
	err   error
	ready chan struct{}
	// waiters counts the Gets waiting for the load; tests read it.
	waiters int
	// elem is the entry's place in the LRU list; nil while loading or
	// once dropped.
	elem *list.Element
}

// New returns a cache that keeps at most maxBytes of values, as their
// loads size them.
func New[K comparable, V any](maxBytes int64) *Cache[K, V] {
	return &Cache[K, V]{max: maxBytes, entries: map[K]*entry[K, V]{}, lru: list.New()}
}

// Get returns the value of k, calling load when it is not cached; load
// returns the value and the bytes it counts against the bound. Get waits
// for a concurrent load of k, or for ctx to end.
func (c *Cache[K, V]) Get(ctx context.Context, k K, load func() (V, int64, error)) (V, error) {
	c.mu.Lock()
	if e, ok := c.entries[k]; ok {
		if e.elem != nil {
			c.lru.MoveToFront(e.elem)
			c.mu.Unlock()
			return e.val, nil
		}
		e.waiters++
		c.mu.Unlock()
		select {
		case <-e.ready:
			return e.val, e.err
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		}
	}
	e := &entry[K, V]{key: k, ready: make(chan struct{})}
	c.entries[k] = e
	c.mu.Unlock()

	e.val, e.size, e.err = load()

	c.mu.Lock()
	if c.entries[k] == e {
		if e.err != nil || e.size > c.max {
			delete(c.entries, k)
		} else {
			e.elem = c.lru.PushFront(e)
			c.used += e.size
			c.evictLocked()
		}
	}
	c.mu.Unlock()
	close(e.ready)
	return e.val, e.err
}

// evictLocked drops least recently used entries until the bound holds.
func (c *Cache[K, V]) evictLocked() {
	for c.used > c.max {
		back := c.lru.Back()
		if back == nil {
			return
		}
		c.dropLocked(back.Value.(*entry[K, V]))
	}
}

func (c *Cache[K, V]) dropLocked(e *entry[K, V]) {
	if e.elem != nil {
		c.lru.Remove(e.elem)
		c.used -= e.size
		e.elem = nil
	}
	if c.entries[e.key] == e {
		delete(c.entries, e.key)
	}
}

// RemoveFunc drops every entry whose key drop reports true.
func (c *Cache[K, V]) RemoveFunc(drop func(K) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if drop(k) {
			c.dropLocked(e)
		}
	}
}

// Stats reports the entries kept and the bytes they count.
func (c *Cache[K, V]) Stats() (entries int, used int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.used
}
