package apps

import (
	"cmp"
	"slices"
)

// Holding is a number of containers and the memory and vcores they hold.
type Holding struct {
	Containers int32
	MemoryMB   int64
	VCores     int32
}

// Add returns h and o added up.
func (h Holding) Add(o Holding) Holding {
	return Holding{h.Containers + o.Containers, h.MemoryMB + o.MemoryMB, h.VCores + o.VCores}
}

// Sub returns h less o.
func (h Holding) Sub(o Holding) Holding {
	return Holding{h.Containers - o.Containers, h.MemoryMB - o.MemoryMB, h.VCores - o.VCores}
}

// Held is what an application's containers hold now. The application keeps
// it up to date as its containers come, change size, move to a later
// attempt and end, so reading it costs the same at any number of
// containers (Used and LiveUsage count them).
type Held struct {
	// Live is every live container's (allocated, acquired or running),
	// over all attempts: Used's figures.
	Live Holding
	// Current and Reserved are the current attempt's live containers and
	// reservations while the scheduler holds the attempt, LiveUsage's
	// figures; zero when it holds none.
	Current, Reserved Holding
	// AM is the current attempt's AM container as allocated (one
	// container), whatever its state; zero before it has one.
	AM Holding
	// Containers is how many containers the application has had
	// (Containers' length).
	Containers int
	// Partitions are Current's, Reserved's and AM's part in each
	// labelled node-label partition, by name; the default partition's
	// is the rest.
	Partitions []PartitionHeld
}

// PartitionHeld is what the current attempt holds in one node-label
// partition.
type PartitionHeld struct {
	Partition             string
	Current, Reserved, AM Holding
}

// Held returns what the application's containers hold now.
func (a *Application) Held() Held {
	h := Held{Live: a.live, Containers: len(a.order)}
	t := a.CurrentAttempt()
	if t == nil {
		return h
	}
	if t.inScheduler() {
		if p := a.holdings[t.id]; p != nil {
			h.Current, h.Reserved = p[0], p[1]
		}
		for k, p := range a.labelled {
			if k.attempt == t.id {
				h.Partitions = append(h.Partitions, PartitionHeld{Partition: k.partition, Current: p[0], Reserved: p[1]})
			}
		}
	}
	if t.amContainer != nil {
		r := t.amContainer.GetResource()
		h.AM = Holding{1, r.GetMemory(), r.GetVirtualCores()}
		if id, ok := t.amContainerID(); ok && a.containers[id] != nil && a.containers[id].partition != "" {
			label := a.containers[id].partition
			i := slices.IndexFunc(h.Partitions, func(p PartitionHeld) bool { return p.Partition == label })
			if i < 0 {
				h.Partitions = append(h.Partitions, PartitionHeld{Partition: label})
				i = len(h.Partitions) - 1
			}
			h.Partitions[i].AM = h.AM
		}
	}
	slices.SortFunc(h.Partitions, func(x, y PartitionHeld) int { return cmp.Compare(x.Partition, y.Partition) })
	return h
}

// hold is what one container counts for in Held: its holder and, when it
// is live or reserved, its size.
type hold struct {
	holder         AttemptID
	partition      string
	live, reserved bool
	mb             int64
	vc             int32
}

// holdKey is an attempt's holding in one labelled partition.
type holdKey struct {
	attempt   AttemptID
	partition string
}

func (c *Container) hold() hold {
	h := hold{holder: c.holder, partition: c.partition, live: c.state.live(), reserved: c.state == ContainerStateReserved}
	if h.live || h.reserved {
		h.mb, h.vc = c.Resource()
	}
	return h
}

// rehold moves what a container counts for from before to after a change
// of its state, size or holder.
func (a *Application) rehold(before, after hold) {
	if before == after {
		return
	}
	a.count(before, -1)
	a.count(after, 1)
}

func (a *Application) count(h hold, sign int64) {
	if !h.live && !h.reserved {
		return
	}
	x := Holding{int32(sign), sign * h.mb, int32(sign) * h.vc}
	kind := 1
	if h.live {
		a.live = a.live.Add(x)
		kind = 0
	}
	p := a.holdings[h.holder]
	if p == nil {
		if a.holdings == nil {
			a.holdings = map[AttemptID]*[2]Holding{}
		}
		p = &[2]Holding{}
		a.holdings[h.holder] = p
	}
	p[kind] = p[kind].Add(x)
	if *p == ([2]Holding{}) {
		delete(a.holdings, h.holder)
	}
	if h.partition == "" {
		return
	}
	k := holdKey{h.holder, h.partition}
	l := a.labelled[k]
	if l == nil {
		if a.labelled == nil {
			a.labelled = map[holdKey]*[2]Holding{}
		}
		l = &[2]Holding{}
		a.labelled[k] = l
	}
	l[kind] = l[kind].Add(x)
	if *l == ([2]Holding{}) {
		delete(a.labelled, k)
	}
}
