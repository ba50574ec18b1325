package lru

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waiting reports how many Gets wait for the load of k.
func (c *Cache[K, V]) waiting(k K) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		return e.waiters
	}
	return 0
}

// tenRecords loads a value of 240 bytes, an index of 10 partitions.
func tenRecords(loads *int) func() ([]int, int64, error) {
	return func() ([]int, int64, error) { *loads++; return make([]int, 10), 240, nil }
}

func TestCacheStaysWithinItsByteBound(t *testing.T) {
	// The bound holds 3 values of 240 bytes.
	c := New[string, []int](3*240 + 100)
	loads := 0
	load := tenRecords(&loads)
	ctx := context.Background()
	for i := range 5 {
		if _, err := c.Get(ctx, strconv.Itoa(i), load); err != nil {
			t.Fatal(err)
		}
		if _, used := c.Stats(); used > 3*240+100 {
			t.Fatalf("after %d values the cache counts %d bytes", i+1, used)
		}
	}
	if n, used := c.Stats(); n != 3 || used != 720 {
		t.Errorf("cache holds %d values, %d bytes; want 3, 720", n, used)
	}
	// 2, 3 and 4 are kept: reading them loads nothing.
	loads = 0
	for _, k := range []string{"2", "3", "4"} {
		c.Get(ctx, k, load)
	}
	if loads != 0 {
		t.Errorf("%d loads of kept values", loads)
	}
	// Touch 2, add 5: 3, now the least recently used, goes.
	c.Get(ctx, "2", load)
	c.Get(ctx, "5", load)
	loads = 0
	c.Get(ctx, "2", load)
	if loads != 0 {
		t.Error("the recently used value was evicted")
	}
	c.Get(ctx, "3", load)
	if loads != 1 {
		t.Error("the least recently used value was kept")
	}
}

func TestValueLargerThanTheBoundIsReturnedButNotKept(t *testing.T) {
	c := New[string, []int](100)
	loads := 0
	v, err := c.Get(context.Background(), "m", tenRecords(&loads))
	if err != nil || len(v) != 10 {
		t.Fatalf("got %d records, %v", len(v), err)
	}
	if n, used := c.Stats(); n != 0 || used != 0 {
		t.Errorf("cache holds %d values, %d bytes", n, used)
	}
}

func TestConcurrentGetsLoadAKeyOnce(t *testing.T) {
	c := New[string, []int](1 << 20)
	release := make(chan struct{})
	var mu sync.Mutex
	loads := 0
	load := func() ([]int, int64, error) {
		mu.Lock()
		loads++
		mu.Unlock()
		<-release
		return make([]int, 3), 72, nil
	}
	const getters = 8
	var wg sync.WaitGroup
	for range getters {
		wg.Go(func() {
			if v, err := c.Get(context.Background(), "m", load); err != nil || len(v) != 3 {
				t.Errorf("got %d records, %v", len(v), err)
			}
		})
	}
	// One Get loads; the others wait for it before it is let finish.
	deadline := time.Now().Add(10 * time.Second)
	for c.waiting("m") < getters-1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Gets wait for the load", c.waiting("m"), getters-1)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if loads != 1 {
		t.Errorf("%d loads, want 1", loads)
	}
}

func TestFailedLoadsAreNotKept(t *testing.T) {
	c := New[string, []int](1 << 20)
	boom := errors.New("boom")
	if _, err := c.Get(context.Background(), "m", func() ([]int, int64, error) { return nil, 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("Get: %v, want the load's error", err)
	}
	loads := 0
	if v, err := c.Get(context.Background(), "m", tenRecords(&loads)); err != nil || len(v) != 10 || loads != 1 {
		t.Errorf("after a failed load: %d records, %v, %d loads; want a new load", len(v), err, loads)
	}
}

func TestWaitersStopWhenTheirContextEnds(t *testing.T) {
	c := New[string, []int](1 << 20)
	release := make(chan struct{})
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		c.Get(context.Background(), "m", func() ([]int, int64, error) { <-release; return nil, 0, nil })
	}()
	deadline := time.Now().Add(10 * time.Second)
	for c.entriesLen() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the load never started")
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Get(ctx, "m", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with an ended context: %v, want context.Canceled", err)
	}
	close(release)
	<-loaded
}

func TestRemoveFuncDropsKeptEntriesAndLoadsInProgress(t *testing.T) {
	type key struct{ app, path string }
	c := New[key, []int](1 << 20)
	ctx := context.Background()
	loads := 0
	for _, k := range []key{{"a", "1"}, {"a", "2"}, {"b", "1"}} {
		c.Get(ctx, k, tenRecords(&loads))
	}
	release := make(chan struct{})
	loading := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Get(ctx, key{"a", "3"}, func() ([]int, int64, error) { close(loading); <-release; return make([]int, 1), 24, nil })
	}()
	<-loading
	c.RemoveFunc(func(k key) bool { return k.app == "a" })
	close(release)
	<-done
	if n, used := c.Stats(); n != 1 || used != 240 {
		t.Errorf("after removing app a: %d values, %d bytes; want 1, 240", n, used)
	}
	loads = 0
	c.Get(ctx, key{"b", "1"}, tenRecords(&loads))
	c.Get(ctx, key{"a", "3"}, tenRecords(&loads))
	if loads != 1 {
		t.Errorf("%d loads; want only the removed key's", loads)
	}
}

func (c *Cache[K, V]) entriesLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
