package nodes

import (
	"context"
	"maps"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// Capability is what the running nodes of one node-label partition hold.
type Capability struct {
	MB, Vcores int64
}

// partitionSums are the running nodes' capability per labelled partition
// (Info.Partition), kept as nodes change; the default partition is the
// census's running capability less all of these.
type partitionSums map[string]Capability

// add counts one node in (sign 1) or out (sign -1).
func (s partitionSums) add(info Info, sign int64) {
	if info.Partition == "" || info.State != yarnpb.NodeStateProto_NS_RUNNING {
		return
	}
	c := s[info.Partition]
	c.MB += sign * info.CapabilityMB
	c.Vcores += sign * int64(info.CapabilityVcores)
	if c == (Capability{}) {
		delete(s, info.Partition)
		return
	}
	s[info.Partition] = c
}

// Partitions sums the capability of the running nodes of each labelled
// partition (the nodes labelled launch.NodeLabelPartition), by partition,
// without listing them. The caller owns the map.
func (l *Lister) Partitions(context.Context) (map[string]Capability, error) {
	l.view.mu.RLock()
	defer l.view.mu.RUnlock()
	return maps.Clone(map[string]Capability(l.view.partitions)), nil
}

// PartitionsOf is Partitions of nodes listed, for NodeListers that hold a
// list, not informers.
func PartitionsOf(nodes []Info) map[string]Capability {
	s := partitionSums{}
	for _, n := range nodes {
		s.add(n, 1)
	}
	return s
}
