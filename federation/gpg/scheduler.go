package gpg

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/knitdev/knit/federation/store"
)

// maxSchedulerBody bounds an RM's scheduler answer: a few hundred bytes
// per queue.
const maxSchedulerBody = 16 << 20

// RESTQueues asks a sub-cluster RM's REST scheduler for its queues, as
// PolicyGenerator.getSchedulerInfo does.
type RESTQueues struct {
	// Client makes the calls; nil means http.DefaultClient.
	Client *http.Client
}

var _ Queues = RESTQueues{}

// Queues returns the names of every queue below the root of the
// CapacityScheduler's /ws/v1/cluster/scheduler. YARN's generator keeps
// only the parent queues, which its Routers never look up for a leaf
// submission; Knit's weighs every queue, so that a submission's queue
// finds its policy.
func (q RESTQueues) Queues(ctx context.Context, sc store.SubClusterInfo) ([]string, error) {
	c := q.Client
	if c == nil {
		c = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+sc.RMWebServiceAddress+"/ws/v1/cluster/scheduler", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scheduler of %s: %w", sc.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scheduler of %s: %s", sc.ID, resp.Status)
	}
	return parseSchedulerQueues(io.LimitReader(resp.Body, maxSchedulerBody))
}

type schedulerQueue struct {
	QueueName string `json:"queueName"`
	Queues    *struct {
		Queue []schedulerQueue `json:"queue"`
	} `json:"queues"`
}

func parseSchedulerQueues(r io.Reader) ([]string, error) {
	var body struct {
		Scheduler struct {
			SchedulerInfo struct {
				Type string `json:"type"`
				schedulerQueue
			} `json:"schedulerInfo"`
		} `json:"scheduler"`
	}
	if err := json.NewDecoder(r).Decode(&body); err != nil {
		return nil, fmt.Errorf("scheduler info: %w", err)
	}
	info := body.Scheduler.SchedulerInfo
	if info.Type != "capacityScheduler" {
		// PolicyGenerator.extractQueues reads the CapacityScheduler only.
		return nil, fmt.Errorf("scheduler of type %q, not capacityScheduler", info.Type)
	}
	var names []string
	var walk func(qs []schedulerQueue)
	walk = func(qs []schedulerQueue) {
		for _, q := range qs {
			names = append(names, q.QueueName)
			if q.Queues != nil {
				walk(q.Queues.Queue)
			}
		}
	}
	if info.Queues != nil {
		walk(info.Queues.Queue)
	}
	return names, nil
}
