package queues

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// protoDiff returns "" when the messages are equal, else both in text form.
func protoDiff(want, got proto.Message) string {
	if proto.Equal(want, got) {
		return ""
	}
	return "want:\n" + prototext.Format(want) + "\ngot:\n" + prototext.Format(got)
}

func childNames(info *yarnpb.QueueInfoProto) []string {
	var out []string
	for _, c := range info.GetChildQueues() {
		out = append(out, c.GetQueuePath())
	}
	return out
}

// includeChildren lists the children; recursive also lists theirs, as
// ParentQueue.getQueueInfo passes (recursive, recursive) down.
func TestQueueInfoChildren(t *testing.T) {
	tree := fixtureTree(t, Options{})
	tests := []struct {
		name                        string
		includeChildren, recursive  bool
		wantChildren, wantGrandkids int
	}{
		{"the queue alone", false, false, 0, 0},
		{"children without theirs", true, false, 3, 0},
		{"the whole tree", true, true, 3, 4},
		{"recursive alone lists nothing", false, true, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := tree.QueueInfo("root", tt.includeChildren, tt.recursive, nil)
			if err != nil {
				t.Fatal(err)
			}
			grandkids := 0
			for _, c := range info.GetChildQueues() {
				grandkids += len(c.GetChildQueues())
			}
			if len(info.GetChildQueues()) != tt.wantChildren || grandkids != tt.wantGrandkids {
				t.Errorf("children %q, grandchildren %d; want %d and %d",
					childNames(info), grandkids, tt.wantChildren, tt.wantGrandkids)
			}
		})
	}
}

// The answer for a leaf, field by field as CSQueueInfoProvider fills it:
// capacities as fractions of the parent, absolute ones in the default
// partition's configurations, statistics from the caller.
func TestQueueInfoOfALeaf(t *testing.T) {
	tree := fixtureTree(t, Options{})
	stats := func(q *Queue) Stats {
		if q.Path != "root.prod.etl" {
			t.Errorf("stats asked for %s", q.Path)
		}
		return Stats{
			UsedCapacity: 0.5, AppsSubmitted: 9, AppsRunning: 2, AppsPending: 1, AppsCompleted: 4,
			AppsKilled: 1, AppsFailed: 1, ActiveUsers: 2,
			AvailableMemoryMB: 1000, AllocatedMemoryMB: 2048, PendingMemoryMB: 512, ReservedMemoryMB: 0,
			AvailableVCores: 10, AllocatedVCores: 2, PendingVCores: 1,
			AllocatedContainers: 2, PendingContainers: 1,
			ClusterMemoryMB: 100000, ClusterVCores: 100,
		}
	}
	got, err := tree.QueueInfo("etl", true, true, stats)
	if err != nil {
		t.Fatal(err)
	}
	want := &yarnpb.QueueInfoProto{
		SchedulerType:                proto.String("CapacityScheduler"),
		QueueName:                    proto.String("etl"),
		QueuePath:                    proto.String("root.prod.etl"),
		AccessibleNodeLabels:         []string{"*"},
		Capacity:                     proto.Float32(0.5),
		MaximumCapacity:              proto.Float32(0.8),
		CurrentCapacity:              proto.Float32(0.5),
		State:                        yarnpb.QueueStateProto_Q_RUNNING.Enum(),
		PreemptionDisabled:           proto.Bool(true),
		IntraQueuePreemptionDisabled: proto.Bool(true),
		Weight:                       proto.Float32(-1),
		MaxParallelApps:              proto.Int32(2147483647),
		QueueStatistics: &yarnpb.QueueStatisticsProto{
			NumAppsSubmitted: proto.Int64(9), NumAppsRunning: proto.Int64(2), NumAppsPending: proto.Int64(1),
			NumAppsCompleted: proto.Int64(4), NumAppsKilled: proto.Int64(1), NumAppsFailed: proto.Int64(1),
			NumActiveUsers: proto.Int64(2), AvailableMemoryMB: proto.Int64(1000), AllocatedMemoryMB: proto.Int64(2048),
			PendingMemoryMB: proto.Int64(512), ReservedMemoryMB: proto.Int64(0), AvailableVCores: proto.Int64(10),
			AllocatedVCores: proto.Int64(2), PendingVCores: proto.Int64(1), ReservedVCores: proto.Int64(0),
			AllocatedContainers: proto.Int64(2), PendingContainers: proto.Int64(1), ReservedContainers: proto.Int64(0),
		},
		QueueConfigurationsMap: []*yarnpb.QueueConfigurationsMapProto{{
			PartitionName: proto.String(""),
			QueueConfigurations: &yarnpb.QueueConfigurationsProto{
				Capacity:              proto.Float32(0.5),
				AbsoluteCapacity:      proto.Float32(0.3),
				MaxCapacity:           proto.Float32(0.8),
				AbsoluteMaxCapacity:   proto.Float32(0.8),
				MaxAMPercentage:       proto.Float32(0.1),
				ConfiguredMinCapacity: resource(0, 0),
				ConfiguredMaxCapacity: resource(0, 0),
				EffectiveMinCapacity:  resource(30000, 30),
				EffectiveMaxCapacity:  resource(80000, 80),
			},
		}},
	}
	if diff := protoDiff(want, got); diff != "" {
		t.Errorf("QueueInfo(etl) differs:\n%s", diff)
	}
}

func TestQueueInfoLabelsAndDrainingState(t *testing.T) {
	tree := fixtureTree(t, Options{})
	def, err := tree.QueueInfo("default", false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if def.GetDefaultNodeLabelExpression() != "gpu" || len(def.GetAccessibleNodeLabels()) != 2 {
		t.Errorf("default: expression %q, labels %q", def.GetDefaultNodeLabelExpression(), def.GetAccessibleNodeLabels())
	}
	if etl, _ := tree.QueueInfo("etl", false, false, nil); etl.DefaultNodeLabelExpression != nil {
		t.Error("a queue without a default expression reports one")
	}
	// A stopped queue with applications left drains, as the scheduler's
	// stopQueue makes it.
	busy := func(*Queue) Stats { return Stats{AppsRunning: 1} }
	alpha, _ := tree.QueueInfo("alpha", false, false, busy)
	idle, _ := tree.QueueInfo("alpha", false, false, nil)
	if alpha.GetState() != yarnpb.QueueStateProto_Q_DRAINING || idle.GetState() != yarnpb.QueueStateProto_Q_STOPPED {
		t.Errorf("stopped queue with applications %v, without %v", alpha.GetState(), idle.GetState())
	}
}

// getQueueInfo of a name the scheduler cannot resolve fails as YARN's
// does; an ambiguous short name is unknown to it too.
func TestQueueInfoOfAnUnknownQueue(t *testing.T) {
	tree := fixtureTree(t, Options{})
	for _, name := range []string{"nope", "reports"} {
		_, err := tree.QueueInfo(name, false, false, nil)
		var e *Error
		if !errors.As(err, &e) || e.Class != yarnerr.YarnException || e.Message != "java.io.IOException: Unknown queue: "+name {
			t.Errorf("QueueInfo(%s) = %v", name, err)
		}
	}
}

func TestUserACLsListEveryQueueDepthFirst(t *testing.T) {
	tree := fixtureTree(t, Options{Groups: groupsOf})
	const (
		submit = yarnpb.QueueACLProto_QACL_SUBMIT_APPLICATIONS
		admin  = yarnpb.QueueACLProto_QACL_ADMINISTER_QUEUE
	)
	acl := func(path string, acls ...yarnpb.QueueACLProto) *yarnpb.QueueUserACLInfoProto {
		return &yarnpb.QueueUserACLInfoProto{QueueName: proto.String(path), UserAcls: acls}
	}
	tests := []struct {
		user string
		want []*yarnpb.QueueUserACLInfoProto
	}{
		{"carol", []*yarnpb.QueueUserACLInfoProto{
			acl("root"), acl("root.prod", submit), acl("root.prod.etl", submit), acl("root.prod.reports", submit),
			acl("root.dev"), acl("root.dev.alpha"), acl("root.dev.reports"), acl("root.default", submit),
		}},
		{"yarn", []*yarnpb.QueueUserACLInfoProto{
			acl("root", admin), acl("root.prod", admin), acl("root.prod.etl", admin), acl("root.prod.reports", admin),
			acl("root.dev", admin), acl("root.dev.alpha", admin), acl("root.dev.reports", admin),
			acl("root.default", submit, admin),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.user, func(t *testing.T) {
			got := tree.UserACLs(tt.user, nil)
			if len(got) != len(tt.want) {
				t.Fatalf("UserACLs(%s) lists %d queues, want %d", tt.user, len(got), len(tt.want))
			}
			for i := range got {
				if diff := protoDiff(tt.want[i], got[i]); diff != "" {
					t.Errorf("UserACLs(%s)[%d] differs:\n%s", tt.user, i, diff)
				}
			}
		})
	}
}
