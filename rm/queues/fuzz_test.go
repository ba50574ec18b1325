package queues

import (
	"bytes"
	"math"
	"os"
	"testing"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// FuzzBuild reads arbitrary capacity-scheduler.xml documents. Build must
// never panic, and a Tree it accepts must keep the CapacityScheduler's
// invariants: children's capacities add up to 0 or 1, no queue's absolute
// capacity exceeds its absolute maximum, every queue is found by its path,
// and the answers built from the Tree cover every queue.
func FuzzBuild(f *testing.F) {
	b, err := os.ReadFile("testdata/capacity-scheduler.xml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for _, s := range []string{
		`<configuration><property><name>yarn.scheduler.capacity.root.queues</name><value>a,b</value></property>
		<property><name>yarn.scheduler.capacity.root.a.capacity</name><value>50</value></property>
		<property><name>yarn.scheduler.capacity.root.b.capacity</name><value>50</value></property></configuration>`,
		`<configuration><property name="yarn.scheduler.capacity.root.queues" value="a"/>
		<property name="yarn.scheduler.capacity.root.a.capacity" value="100"/>
		<property name="yarn.scheduler.capacity.root.a.queues" value="a"/>
		<property name="yarn.scheduler.capacity.root.a.a.capacity" value="1e2"/>
		<property name="yarn.scheduler.capacity.root.a.a.state" value="STOPPED"/></configuration>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := hadoopconf.New(hadoopconf.Options{Limits: hadoopconf.Limits{MaxBytes: 1 << 16}, LookupEnv: noEnv})
		if err := c.AddResource(bytes.NewReader(data), "fuzz.xml"); err != nil {
			return
		}
		tree, err := Build(c, Options{})
		if err != nil {
			return
		}
		queues := tree.Queues()
		for _, q := range queues {
			if got, err := tree.Lookup(q.Path); err != nil || got != q {
				t.Fatalf("Lookup(%s) = %v, %v", q.Path, got, err)
			}
			if q.AbsoluteCapacity > q.AbsoluteMaximumCapacity {
				t.Fatalf("%s: absolute capacity %v above its maximum %v", q.Path, q.AbsoluteCapacity, q.AbsoluteMaximumCapacity)
			}
			if q.IsLeaf() && q.MaxApplicationsPerUser > q.MaxApplications {
				t.Fatalf("%s: %d per user above %d", q.Path, q.MaxApplicationsPerUser, q.MaxApplications)
			}
			if q.IsLeaf() {
				continue
			}
			var sum float32
			for _, ch := range q.Children {
				sum += ch.Capacity
			}
			if math.Abs(float64(1-sum)) > float64(precision) && math.Abs(float64(sum)) > float64(precision) {
				t.Fatalf("%s: children add up to %v", q.Path, sum)
			}
		}
		if n := len(tree.UserACLs("u", nil)); n != len(queues) {
			t.Fatalf("UserACLs lists %d of %d queues", n, len(queues))
		}
		info, err := tree.QueueInfo("root", true, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		var count func(*yarnpb.QueueInfoProto) int
		count = func(i *yarnpb.QueueInfoProto) int {
			n := 1
			for _, c := range i.GetChildQueues() {
				n += count(c)
			}
			return n
		}
		if n := count(info); n != len(queues) {
			t.Fatalf("QueueInfo(root, recursive) covers %d of %d queues", n, len(queues))
		}
	})
}
