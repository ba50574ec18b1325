package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/rks/launch"
)

// DefaultPublishInterval is how often a Publisher measures when
// PublisherConfig.Interval is zero. A NodeManager measures every 3 s and
// sends its figures on each heartbeat; a Node update is a write every
// watcher of Nodes hears, so Knit measures less often and writes only
// what changed.
const DefaultPublishInterval = 10 * time.Second

// DefaultPublishThreshold is the share a figure must move by before it is
// published again when PublisherConfig.Threshold is zero.
const DefaultPublishThreshold = 0.05

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Client annotates the Node. Required.
	Client kubernetes.Interface
	// NodeName is the Node to annotate. Required.
	NodeName string
	// Collector measures the containers and reads /proc from its
	// ProcRoot. Required.
	Collector *Collector
	// Interval is how often to measure. If zero, DefaultPublishInterval.
	Interval time.Duration
	// Threshold is the share of its published value a figure must move by
	// to be published again. If zero, DefaultPublishThreshold.
	Threshold float64
	// Logger logs failed measurements and writes. If nil, slog.Default().
	Logger *slog.Logger
}

// Publisher publishes the node's utilization on its Node
// (launch.AnnotationUtilization), for the RM's node reports: measured
// every Interval, written only when it moved beyond the threshold.
type Publisher struct {
	cfg     PublisherConfig
	log     *slog.Logger
	sampler *sampler

	// vcores is the node's allocatable CPU, once nodeRead.
	vcores   int
	nodeRead bool
	// published is what the Node holds.
	published launch.NodeUtilization
}

// NewPublisher returns a Publisher; Run publishes.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if cfg.Client == nil || cfg.NodeName == "" || cfg.Collector == nil {
		return nil, errors.New("metrics: PublisherConfig needs Client, NodeName and Collector")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultPublishInterval
	}
	if cfg.Threshold <= 0 {
		cfg.Threshold = DefaultPublishThreshold
	}
	p := &Publisher{cfg: cfg, log: cfg.Logger, sampler: newSampler(cfg.Collector)}
	if p.log == nil {
		p.log = slog.Default()
	}
	return p, nil
}

// Run measures every Interval and publishes what changed until ctx ends.
func (p *Publisher) Run(ctx context.Context) error {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := p.tick(ctx, time.Now()); err != nil && ctx.Err() == nil {
			p.log.WarnContext(ctx, "publish utilization", "node", p.cfg.NodeName, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// tick measures at now and publishes when the figures moved enough; it
// reports whether it wrote.
func (p *Publisher) tick(ctx context.Context, now time.Time) (bool, error) {
	if !p.nodeRead {
		// Read once: the node's vcores scale the containers' CPU, and
		// what the Node already holds (from before a restart) need not be
		// written again.
		n, err := p.cfg.Client.CoreV1().Nodes().Get(ctx, p.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("metrics: read node %s: %w", p.cfg.NodeName, err)
		}
		p.vcores, p.nodeRead = max(int(n.Status.Allocatable.Cpu().Value()), 0), true
		if old, err := launch.DecodeUtilization(n.Annotations[launch.AnnotationUtilization]); err == nil {
			p.published = old
		}
	}
	first := p.sampler.at.IsZero()
	u, err := p.sampler.sample(now, p.vcores)
	if err != nil {
		return false, err
	}
	if first {
		// CPU is a rate: the first sample only sets its start.
		return false, nil
	}
	if !changed(p.published, u, p.cfg.Threshold) {
		return false, nil
	}
	v, err := launch.EncodeUtilization(u)
	if err != nil {
		return false, err
	}
	if err := auxservice.PatchNodeAnnotation(ctx, p.cfg.Client, p.cfg.NodeName, launch.AnnotationUtilization, &v); err != nil {
		return false, fmt.Errorf("metrics: publish utilization: %w", err)
	}
	p.published = u
	return true, nil
}
