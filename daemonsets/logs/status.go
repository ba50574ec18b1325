package logs

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/rks/launch"
)

// Log aggregation statuses a node publishes (LogAggregationStatus names).
const (
	StatusRunning   = "RUNNING"
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
)

// StatusSink hears how each application's aggregation goes.
type StatusSink interface {
	SetStatus(app, status string)
}

// StatusPublisher publishes the node's log aggregation statuses on its
// Node (launch.AnnotationLogAggregation), the newest
// launch.MaxLogAggregationApps applications, for the RM's reports.
type StatusPublisher struct {
	client   kubernetes.Interface
	nodeName string
	log      *slog.Logger
	changed  chan struct{}

	mu       sync.Mutex
	seq      uint64 // orders the entries, oldest first
	statuses map[string]statusEntry
}

type statusEntry struct {
	status string
	seq    uint64
}

var _ StatusSink = (*StatusPublisher)(nil)

// NewStatusPublisher returns a publisher; Run publishes.
func NewStatusPublisher(client kubernetes.Interface, nodeName string, log *slog.Logger) *StatusPublisher {
	if log == nil {
		log = slog.Default()
	}
	return &StatusPublisher{client: client, nodeName: nodeName, log: log,
		changed: make(chan struct{}, 1), statuses: map[string]statusEntry{}}
}

// SetStatus records an application's status; Run publishes it.
func (p *StatusPublisher) SetStatus(app, status string) {
	p.mu.Lock()
	p.seq++
	p.statuses[app] = statusEntry{status: status, seq: p.seq}
	for len(p.statuses) > launch.MaxLogAggregationApps {
		oldest := ""
		for a, e := range p.statuses {
			if oldest == "" || e.seq < p.statuses[oldest].seq {
				oldest = a
			}
		}
		delete(p.statuses, oldest)
	}
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// Run keeps what the Node already says (from before a restart), then
// publishes every change until ctx ends.
func (p *StatusPublisher) Run(ctx context.Context) error {
	if n, err := p.client.CoreV1().Nodes().Get(ctx, p.nodeName, metav1.GetOptions{}); err == nil {
		if old, err := launch.DecodeLogAggregation(n.Annotations[launch.AnnotationLogAggregation]); err == nil {
			p.mu.Lock()
			for app, st := range old {
				if _, ok := p.statuses[app]; !ok {
					p.statuses[app] = statusEntry{status: st}
				}
			}
			p.mu.Unlock()
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.changed:
		}
		if err := p.publish(ctx); err != nil && ctx.Err() == nil {
			p.log.WarnContext(ctx, "publish log aggregation statuses", "node", p.nodeName, "err", err)
		}
	}
}

func (p *StatusPublisher) publish(ctx context.Context) error {
	p.mu.Lock()
	apps := make([]string, 0, len(p.statuses))
	for a := range p.statuses {
		apps = append(apps, a)
	}
	sort.Strings(apps)
	out := make(map[string]string, len(apps))
	for _, a := range apps {
		out[a] = p.statuses[a].status
	}
	p.mu.Unlock()
	v, err := launch.EncodeLogAggregation(out)
	if err != nil {
		return err
	}
	if err := auxservice.PatchNodeAnnotation(ctx, p.client, p.nodeName, launch.AnnotationLogAggregation, &v); err != nil {
		return fmt.Errorf("logs: publish statuses: %w", err)
	}
	return nil
}
