package queues

import (
	"math"
	"slices"
	"strings"
)

// keyLabels is the infix of the per-partition properties:
// <queue>.accessible-node-labels.<label>.<setting>.
const keyLabels = "accessible-node-labels"

// PartitionCapacity is a queue's share of one node-label partition: the
// resources of the nodes carrying the label, as the CapacityScheduler's
// QueueCapacities keeps them per label.
type PartitionCapacity struct {
	// Capacity and MaximumCapacity are fractions of the parent's share of
	// the partition (0..1).
	Capacity, MaximumCapacity float32
	// AbsoluteCapacity and AbsoluteMaximumCapacity are fractions of the
	// partition.
	AbsoluteCapacity, AbsoluteMaximumCapacity float32
	// MaxAMResourcePercent is the share of the queue's guarantee in the
	// partition AMs may use (0..1).
	MaxAMResourcePercent float32
}

// CanAccess reports whether the queue may run containers in the partition
// ("" is the default partition, which every queue may use), as
// QueueNodeLabelsSettings.isAccessibleToPartition decides.
func (q *Queue) CanAccess(partition string) bool {
	return partition == "" || slices.Contains(q.AccessibleNodeLabels, AnyNodeLabel) || slices.Contains(q.AccessibleNodeLabels, partition)
}

// Partition is the queue's capacity in a partition ("" the default) and
// whether the queue may use it. A label the queue's configuration does not
// name has the CapacityScheduler's defaults: capacity 0, maximum capacity
// 100% of the parent's (root holds every partition whole).
func (q *Queue) Partition(partition string) (PartitionCapacity, bool) {
	return q.partition(partition), q.CanAccess(partition)
}

// partition is the queue's capacity in a partition, accessible or not: a
// child's absolute figures build on its parent's.
func (q *Queue) partition(label string) PartitionCapacity {
	if label == "" {
		return PartitionCapacity{Capacity: q.Capacity, MaximumCapacity: q.MaximumCapacity,
			AbsoluteCapacity: q.AbsoluteCapacity, AbsoluteMaximumCapacity: q.AbsoluteMaximumCapacity,
			MaxAMResourcePercent: q.MaxAMResourcePercent}
	}
	if c, ok := q.Partitions[label]; ok {
		return c
	}
	if q.Parent == nil {
		return PartitionCapacity{Capacity: 1, MaximumCapacity: 1, AbsoluteCapacity: 1, AbsoluteMaximumCapacity: 1,
			MaxAMResourcePercent: q.MaxAMResourcePercent}
	}
	return PartitionCapacity{MaximumCapacity: 1, AbsoluteMaximumCapacity: q.Parent.partition(label).AbsoluteMaximumCapacity,
		MaxAMResourcePercent: q.MaxAMResourcePercent}
}

// NodeLabels are the partitions the CapacityScheduler reports the queue's
// figures in (AbstractCSQueue.getNodeLabelsForQueue): those it may use or,
// when it may use any, those its configuration names and used (the
// labelled partitions its applications hold resources in); the default
// partition always, first, the others by name.
func (q *Queue) NodeLabels(used []string) []string {
	var labels []string
	if slices.Contains(q.AccessibleNodeLabels, AnyNodeLabel) {
		for l := range q.Partitions {
			labels = append(labels, l)
		}
		labels = append(labels, used...)
	} else {
		labels = append(labels, q.AccessibleNodeLabels...)
	}
	labels = append(labels, "")
	slices.Sort(labels)
	return slices.Compact(labels)
}

// configuredLabels maps each queue path to the labels its configuration
// names in <path>.accessible-node-labels.<label>.<setting>, and "" to every
// such label of any queue (root's, as ConfiguredNodeLabels.
// getAllConfiguredLabels gives them), each list sorted. One walk of the
// property names serves every queue.
func configuredLabels(names []string) map[string][]string {
	out := map[string][]string{}
	infix := "." + keyLabels + "."
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, Prefix)
		if !ok {
			continue
		}
		i := strings.Index(rest, infix)
		if i < 0 {
			continue
		}
		path, tail := rest[:i], rest[i+len(infix):]
		j := strings.IndexByte(tail, '.')
		if j <= 0 {
			// No setting after the label: not a per-partition property.
			continue
		}
		label := tail[:j]
		for _, k := range []string{path, ""} {
			if !slices.Contains(out[k], label) {
				out[k] = append(out[k], label)
			}
		}
	}
	for _, l := range out {
		slices.Sort(l)
	}
	return out
}

// partitions reads the queue's capacity, maximum capacity and AM share in
// each partition its configuration names, as CSQueueUtils.
// loadCapacitiesByLabelsFromConf and CapacitySchedulerConfiguration.
// internalGetLabeledQueueCapacity do: capacity defaults to 0, maximum
// capacity to 100, both within [0, 100]; root's are always 100; the AM
// share defaults to the queue's. Absolute figures are the parent's in the
// same partition times the queue's, checked as capacitiesSanityCheck does.
func (b *builder) partitions(q *Queue, _ bool) error {
	labels := b.labelsByQueue[q.Path]
	if q.Parent == nil {
		labels = b.labelsByQueue[""]
	}
	if len(labels) == 0 {
		return nil
	}
	q.Partitions = make(map[string]PartitionCapacity, len(labels))
	for _, label := range labels {
		c := PartitionCapacity{Capacity: 1, MaximumCapacity: 1}
		if q.Parent != nil {
			capacity, err := b.labelPercent(q, label, "capacity", 0)
			if err != nil {
				return err
			}
			maxCapacity, err := b.labelPercent(q, label, "maximum-capacity", 100)
			if err != nil {
				return err
			}
			c.Capacity, c.MaximumCapacity = capacity/100, maxCapacity/100
		}
		am, err := b.c.GetFloat(b.key(q, labelSetting(label, "maximum-am-resource-percent")), q.MaxAMResourcePercent)
		if err != nil {
			return configError(err)
		}
		c.MaxAMResourcePercent = am
		parentAbs, parentAbsMax := float32(1), float32(1)
		if q.Parent != nil {
			p := q.Parent.partition(label)
			parentAbs, parentAbsMax = p.AbsoluteCapacity, p.AbsoluteMaximumCapacity
		}
		if c.AbsoluteCapacity, c.AbsoluteMaximumCapacity, err = absolute(c.Capacity, c.MaximumCapacity, parentAbs, parentAbsMax, q.Path, label); err != nil {
			return err
		}
		q.Partitions[label] = c
	}
	return nil
}

// labelSetting is the suffix of a per-partition setting's property.
func labelSetting(label, setting string) string { return keyLabels + "." + label + "." + setting }

// labelPercent reads one per-partition capacity, def when unset.
func (b *builder) labelPercent(q *Queue, label, setting string, def float32) (float32, error) {
	v, ok, err := b.percent(q, labelSetting(label, setting))
	if err != nil {
		return 0, err
	}
	if !ok {
		v = def
	}
	if math.IsNaN(float64(v)) || v < 0 || v > 100 {
		return 0, invalid("Illegal capacity of %s for node-label=%s in queue=%s, valid capacity should in range of [0, 100].",
			javaFloat(v), label, q.Path)
	}
	return v, nil
}

// checkAccessibleLabels is QueueNodeLabelsSettings.validateNodeLabels: under
// a parent that may not use every partition, a queue may use only
// partitions its parent may.
func checkAccessibleLabels(q *Queue) error {
	if q.Parent == nil || slices.Contains(q.Parent.AccessibleNodeLabels, AnyNodeLabel) {
		return nil
	}
	if slices.Contains(q.AccessibleNodeLabels, AnyNodeLabel) {
		return invalid("Parent's accessible queue is not ANY(*), but child's accessible queue is *")
	}
	var diff []string
	for _, l := range q.AccessibleNodeLabels {
		if !slices.Contains(q.Parent.AccessibleNodeLabels, l) {
			diff = append(diff, l)
		}
	}
	if len(diff) > 0 {
		return invalid("Some labels of child queue is not a subset of parent queue, these labels=[%s]", strings.Join(diff, ","))
	}
	return nil
}

// checkChildPartitionCapacities is checkChildCapacities for each partition
// the parent's configuration names: the children's capacities in it must
// add up to 100% (or to 0% when the parent's is 0% there or
// allow-zero-capacity-sum is set).
func (b *builder) checkChildPartitionCapacities(q *Queue, allowZero bool) error {
	labels := make([]string, 0, len(q.Partitions))
	for l := range q.Partitions {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	for _, label := range labels {
		var sum float32
		for _, c := range q.Children {
			sum += c.partition(label).Capacity
		}
		if err := childSumError(q, label, sum, q.Partitions[label].Capacity, allowZero); err != nil {
			return err
		}
	}
	return nil
}

// childSumError is QueueCapacityChecks' C12, C13 and C14 for one
// partition: nil when the children's sum is fine.
func childSumError(q *Queue, label string, sum, parentCapacity float32, allowZero bool) error {
	abs := func(f float32) float32 { return float32(math.Abs(float64(f))) }
	switch {
	case abs(1-sum) > precision && abs(sum) > precision:
		return invalid("Illegal capacity sum of %s for children of queue %s for label=%s. It should be either 0 or 1.0",
			javaFloat(sum), q.Name, label)
	case abs(1-sum) > precision && abs(parentCapacity) > precision && !allowZero:
		return invalid("Illegal capacity sum of %s for children of queue %s for label=%s. It is set to 0, but parent percent != 0, and doesn't allow children capacity to set to 0",
			javaFloat(sum), q.Name, label)
	case abs(1-sum) <= precision && parentCapacity <= 0 && !allowZero:
		return invalid("Illegal capacity sum of %s for children of queue %s for label=%s. queue=%s has zero capacity, but childqueues have positive capacities",
			javaFloat(sum), q.Name, label, q.Name)
	}
	return nil
}
