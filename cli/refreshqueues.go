package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// reportQueues follows a successful -refreshQueues, which Hadoop's RMAdminCLI
// answers with nothing: it prints the capacity-scheduler.xml of the
// client's configuration folder (the local cluster's knit-rm reads that
// same folder) and the queues the RM now has, as getQueueInfo reports them,
// so that a file the RM did not read shows at once.
func (r *runner) reportQueues() error {
	if r.cfg.ConfDir != "" {
		path := filepath.Join(r.cfg.ConfDir, "capacity-scheduler.xml")
		if _, err := os.Stat(path); err == nil {
			fmt.Fprintf(r.out, "capacity-scheduler.xml in this client's configuration: %s\n", path)
		} else {
			fmt.Fprintf(r.out, "no capacity-scheduler.xml in this client's configuration (%s)\n", r.cfg.ConfDir)
		}
	}
	resp, err := r.rm().GetQueueInfo(r.ctx, &yarnpb.GetQueueInfoRequestProto{
		QueueName: proto.String("root"), IncludeChildQueues: proto.Bool(true), Recursive: proto.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("queues after the refresh: %w", err)
	}
	fmt.Fprintf(r.out, "the ResourceManager's queues: %s\n", strings.Join(QueuePaths(resp.GetQueueInfo()), ", "))
	return nil
}

// QueuePaths is the path of q and of every queue under it, depth first, in
// the order getQueueInfo lists children.
func QueuePaths(q *yarnpb.QueueInfoProto) []string {
	paths := []string{q.GetQueuePath()}
	for _, ch := range q.GetChildQueues() {
		paths = append(paths, QueuePaths(ch)...)
	}
	return paths
}
