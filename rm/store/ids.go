package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterConfigMap names the ConfigMap holding the cluster's identity: the
// cluster timestamp and the application id reservation.
const ClusterConfigMap = "knit-rm-cluster"

// Keys of ClusterConfigMap's data, both decimal.
const (
	// keyClusterTimestamp is the cluster timestamp in Unix milliseconds,
	// written once, at the first start of any RM of this cluster.
	keyClusterTimestamp = "clusterTimestamp"
	// keyReservedThrough is the highest application sequence number handed
	// to any RM; every id in use is at most this.
	keyReservedThrough = "applicationIDsReservedThrough"
	// KeyEpoch is the RM epoch: how many times an RM of this cluster has
	// started. Container ids carry it (container_e<epoch>_…), so ids handed
	// out after a restart never repeat ones from before. Exported for the
	// tests that check, from the API server's history, that a deposed
	// leader writes nothing once a newer epoch is raised.
	KeyEpoch = "epoch"
)

// DefaultIDBlockSize is how many application sequence numbers IDs reserves
// with one write: one API call per thousand submissions.
const DefaultIDBlockSize = 1000

// IDBlock is a range of application sequence numbers reserved for one RM:
// First through Last, both included, under ClusterTimestamp.
type IDBlock struct {
	ClusterTimestamp int64
	First, Last      int32
}

// ClusterTimestamp returns the cluster timestamp in Unix milliseconds. The
// first call on a new cluster fixes it at the Store's clock (a federation
// member's at the first millisecond from then on that no other member
// holds); every later call, in any RM and after any restart, returns the
// same value. A federation member's fails when another member holds it.
func (s *Store) ClusterTimestamp(ctx context.Context) (int64, error) {
	var ts int64
	err := s.retry(ctx, "read cluster identity", func(ctx context.Context) error {
		cm, err := s.clusterConfigMap(ctx)
		if err != nil {
			return err
		}
		if ts, _, err = parseCluster(cm); err != nil {
			return err
		}
		return s.holdTimestamp(ctx, ts)
	})
	return ts, err
}

// holdTimestamp has a federation member hold ts, once per Store and
// timestamp; an RM of no federation holds nothing.
func (s *Store) holdTimestamp(ctx context.Context, ts int64) error {
	if s.timestamps == nil || s.held.Load() == ts {
		return nil
	}
	ok, err := s.timestamps.Hold(ctx, ts)
	if err != nil {
		// The federation store out of reach delays the RM, as its own does.
		return fmt.Errorf("%w: %w", errTryAgain, err)
	}
	if !ok {
		return fmt.Errorf("cluster timestamp %d: %w", ts, ErrTimestampTaken)
	}
	s.held.Store(ts)
	s.log.Info("holds its cluster timestamp in the federation", "clusterTimestamp", ts)
	return nil
}

// NextApplicationIDs reserves the next n application sequence numbers and
// returns them once the reservation is stored, so no id is ever used that a
// restarted RM could hand out again. Ids of a block that is never used are
// skipped for good; YARN ids need only be unique and increasing.
func (s *Store) NextApplicationIDs(ctx context.Context, n int32) (IDBlock, error) {
	if n <= 0 {
		return IDBlock{}, fmt.Errorf("store: reserve application ids: block size %d", n)
	}
	var block IDBlock
	err := s.retry(ctx, "reserve application ids", func(ctx context.Context) error {
		cms := s.core.CoreV1().ConfigMaps(s.ns)
		for range maxConflictRounds {
			cm, err := s.clusterConfigMap(ctx)
			if err != nil {
				return err
			}
			ts, reserved, err := parseCluster(cm)
			if err != nil {
				return err
			}
			if err := s.checkEpoch(cm); err != nil {
				return err
			}
			// No id goes out under a timestamp another member holds.
			if err := s.holdTimestamp(ctx, ts); err != nil {
				return err
			}
			if reserved > math.MaxInt32-int64(n) {
				return fmt.Errorf("application ids exhausted: %d reserved, %d more asked", reserved, n)
			}
			cm = cm.DeepCopy()
			cm.Data[keyReservedThrough] = strconv.FormatInt(reserved+int64(n), 10)
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager})
			if apierrors.IsConflict(err) {
				continue // count on from the value now stored, never overwrite it
			}
			if err != nil {
				return err
			}
			block = IDBlock{ClusterTimestamp: ts, First: int32(reserved + 1), Last: int32(reserved + int64(n))}
			return nil
		}
		return errContended
	})
	if err != nil {
		return IDBlock{}, err
	}
	s.log.Info("reserved application ids", "clusterTimestamp", block.ClusterTimestamp, "first", block.First, "last", block.Last)
	return block, nil
}

// NextEpoch raises the RM epoch by one and returns the new value, once it
// is stored. An RM calls it once at start (YARN's RMStateStore.getAndIncrementEpoch).
func (s *Store) NextEpoch(ctx context.Context) (int64, error) {
	var epoch int64
	err := s.retry(ctx, "raise the RM epoch", func(ctx context.Context) error {
		cms := s.core.CoreV1().ConfigMaps(s.ns)
		for range maxConflictRounds {
			cm, err := s.clusterConfigMap(ctx)
			if err != nil {
				return err
			}
			cur := int64(0)
			if raw, ok := cm.Data[KeyEpoch]; ok {
				if cur, err = strconv.ParseInt(raw, 10, 64); err != nil || cur < 0 {
					return fmt.Errorf("configmap %s: %s %q is not an epoch", ClusterConfigMap, KeyEpoch, raw)
				}
			}
			cm = cm.DeepCopy()
			cm.Data[KeyEpoch] = strconv.FormatInt(cur+1, 10)
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager})
			if apierrors.IsConflict(err) {
				continue
			}
			if err != nil {
				return err
			}
			epoch = cur + 1
			s.epoch.Store(epoch)
			return nil
		}
		return errContended
	})
	if err != nil {
		return 0, err
	}
	s.log.Info("raised RM epoch", "epoch", epoch)
	return epoch, nil
}

// checkEpoch refuses to write cm, as read, when it holds a higher epoch
// than this Store's: another RM has started since, and leads. The update
// that follows is conditioned on cm's resourceVersion, so an epoch raised
// after the read fails it with a conflict, and the re-read sees it.
func (s *Store) checkEpoch(cm *corev1.ConfigMap) error {
	mine := s.epoch.Load()
	raw, ok := cm.Data[KeyEpoch]
	if mine == 0 || !ok {
		return nil
	}
	stored, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return fmt.Errorf("configmap %s: %s %q is not an epoch", ClusterConfigMap, KeyEpoch, raw)
	}
	if stored > mine {
		return fmt.Errorf("%w: RM epoch %d has started since this RM's %d", ErrFenced, stored, mine)
	}
	return nil
}

// clusterConfigMap reads ClusterConfigMap, creating it with the cluster
// timestamp fixed at now when it does not exist yet.
func (s *Store) clusterConfigMap(ctx context.Context) (*corev1.ConfigMap, error) {
	cms := s.core.CoreV1().ConfigMaps(s.ns)
	cm, err := cms.Get(ctx, ClusterConfigMap, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return cm, err
	}
	ts := s.now().UnixMilli()
	if s.timestamps != nil {
		if ts, err = s.timestamps.Pick(ctx, ts); err != nil {
			return nil, fmt.Errorf("%w: %w", errTryAgain, err)
		}
		s.held.Store(ts)
	}
	cm, err = cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterConfigMap, Namespace: s.ns},
		Data: map[string]string{
			keyClusterTimestamp: strconv.FormatInt(ts, 10),
			keyReservedThrough:  "0",
		},
	}, metav1.CreateOptions{FieldManager: FieldManager})
	if apierrors.IsAlreadyExists(err) {
		// Another RM, or an attempt of ours whose answer was lost, was
		// first: its timestamp is the cluster's.
		return cms.Get(ctx, ClusterConfigMap, metav1.GetOptions{})
	}
	if err == nil {
		s.log.Info("fixed cluster timestamp", "clusterTimestamp", ts)
	}
	return cm, err
}

// parseCluster reads the cluster timestamp and the end of the reservation.
// A ConfigMap without a reservation has reserved nothing.
func parseCluster(cm *corev1.ConfigMap) (ts, reserved int64, err error) {
	raw, ok := cm.Data[keyClusterTimestamp]
	if !ok {
		return 0, 0, fmt.Errorf("configmap %s: no %s", ClusterConfigMap, keyClusterTimestamp)
	}
	if ts, err = strconv.ParseInt(raw, 10, 64); err != nil || ts <= 0 {
		return 0, 0, fmt.Errorf("configmap %s: %s %q is not a positive integer", ClusterConfigMap, keyClusterTimestamp, raw)
	}
	if raw, ok := cm.Data[keyReservedThrough]; ok {
		if reserved, err = strconv.ParseInt(raw, 10, 32); err != nil || reserved < 0 {
			return 0, 0, fmt.Errorf("configmap %s: %s %q is not a sequence number", ClusterConfigMap, keyReservedThrough, raw)
		}
	}
	return ts, reserved, nil
}

// IDs hands out application ids from blocks reserved with
// NextApplicationIDs. It is safe for concurrent use. A call usually makes
// no API call; the one that finds the block used up reserves the next one,
// and the others wait for it.
type IDs struct {
	store *Store
	size  int32
	// sem is a lock that a waiter can give up on with its context: it is
	// held across the API call that reserves a block.
	sem chan struct{}
	// Guarded by sem. next is the next sequence number to hand out, end is
	// one past the last reserved; next == end means a block is needed.
	// int64, so that a block ending at MaxInt32 cannot overflow them.
	ts        int64
	next, end int64
}

// NewIDs returns an IDs reserving blockSize sequence numbers at a time
// (DefaultIDBlockSize when blockSize <= 0). It reserves nothing until the
// first Next.
func NewIDs(s *Store, blockSize int32) *IDs {
	if blockSize <= 0 {
		blockSize = DefaultIDBlockSize
	}
	return &IDs{store: s, size: blockSize, sem: make(chan struct{}, 1)}
}

// Next returns the cluster timestamp and a sequence number no RM of this
// cluster has handed out before or will hand out again. It fails only when a
// reservation fails (ctx ended, permanent API error, ids exhausted); the
// next call tries again.
func (ids *IDs) Next(ctx context.Context) (clusterTimestamp int64, seq int32, err error) {
	select {
	case ids.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("store: next application id: %w", ctx.Err())
	}
	defer func() { <-ids.sem }()
	if ids.next == ids.end {
		b, err := ids.store.NextApplicationIDs(ctx, ids.size)
		if err != nil {
			return 0, 0, err
		}
		if b.First <= 0 || b.Last < b.First {
			return 0, 0, errors.New("store: next application id: empty block")
		}
		ids.ts, ids.next, ids.end = b.ClusterTimestamp, int64(b.First), int64(b.Last)+1
	}
	seq = int32(ids.next)
	ids.next++
	return ids.ts, seq, nil
}
