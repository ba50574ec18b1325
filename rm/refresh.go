package rm

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/rm/queues"
)

// liveConfig is the part of the RM's configuration the admin protocol
// replaces while the RM runs. Readers load it without locks; mu serialises
// the refreshes, so that one refresh never undoes another's change.
type liveConfig struct {
	mu          sync.Mutex
	tree        atomic.Pointer[queues.Tree]
	templates   atomic.Pointer[podTemplates] // of the tree's queues
	maxPriority atomic.Int32
}

func (l *liveConfig) init(cfg Config) error {
	t, err := loadPodTemplates(cfg.Queues)
	if err != nil {
		return err
	}
	l.tree.Store(cfg.Queues)
	l.templates.Store(&t)
	l.maxPriority.Store(cmp.Or(cfg.MaxApplicationPriority, int32(cfg.Settings.MaxApplicationPriority)))
	return nil
}

// queueTree is the queue hierarchy in force. Every reader goes through it:
// a call that needs several answers from the tree loads it once, so that a
// refresh in between cannot mix two hierarchies.
func (rm *ResourceManager) queueTree() *queues.Tree { return rm.live.tree.Load() }

// maxPriority is yarn.cluster.max-application-priority in force.
func (rm *ResourceManager) maxPriority() int32 { return rm.live.maxPriority.Load() }

// RefreshQueues rebuilds the queue hierarchy from c (capacity-scheduler.xml
// over yarn-site.xml) and swaps it in without a restart, as AdminService's
// refreshQueues does. The new hierarchy is checked against the applications
// the queues hold now, with submissions held back meanwhile so that none
// lands in a queue being removed. A refused configuration changes nothing;
// the error is then the *queues.Error AdminService answers with. ACL
// settings and yarn.admin.acl carry over (refreshAdminAcls changes the
// latter).
func (rm *ResourceManager) RefreshQueues(ctx context.Context, c *hadoopconf.Configuration) error {
	rm.live.mu.Lock()
	defer rm.live.mu.Unlock()
	rm.admitMu.Lock()
	defer rm.admitMu.Unlock()
	next, err := rm.queueTree().Reload(c, rm.counts())
	if err != nil {
		return fmt.Errorf("refresh queues: %w", err)
	}
	templates, err := loadPodTemplates(next)
	if err != nil {
		return fmt.Errorf("refresh queues: %w", err)
	}
	rm.live.tree.Store(next)
	rm.live.templates.Store(&templates)
	for _, w := range next.Warnings() {
		rm.log.WarnContext(ctx, "queue configuration", "warning", w)
	}
	paths := make([]string, 0, len(next.Queues()))
	for _, q := range next.Queues() {
		paths = append(paths, q.Path)
	}
	// The file the hierarchy came from: whichever resource set the root's
	// queues ("" when only the built-in default did).
	rm.log.InfoContext(ctx, "queues refreshed", "file", c.Source("yarn.scheduler.capacity.root.queues"), "queues", paths)
	return nil
}

// RefreshAdminACL replaces yarn.admin.acl with c's value (YARN's default
// "*"), as refreshAdminAcls does. Knit keeps one admin ACL: it decides both
// who may call the admin protocol and who may access every application.
func (rm *ResourceManager) RefreshAdminACL(ctx context.Context, c *hadoopconf.Configuration) error {
	v, err := c.Get(hadoopconf.KeyAdminACL, "*")
	if err != nil {
		return fmt.Errorf("refresh admin ACL: %w", err)
	}
	acl := acl.Parse(v)
	rm.live.mu.Lock()
	rm.live.tree.Store(rm.queueTree().WithAdminACL(acl))
	rm.live.mu.Unlock()
	rm.log.InfoContext(ctx, "admin ACL refreshed", "acl", acl.String())
	return nil
}

// RefreshClusterMaxPriority replaces yarn.cluster.max-application-priority
// with c's value (YARN's default 0), as refreshClusterMaxPriority does.
// Applications keep the priorities they have; later submissions and
// priority updates are capped at the new maximum.
func (rm *ResourceManager) RefreshClusterMaxPriority(ctx context.Context, c *hadoopconf.Configuration) error {
	p, err := c.GetInt(hadoopconf.KeyClusterMaxApplicationPriority, 0)
	if err != nil {
		return fmt.Errorf("refresh cluster max priority: %w", err)
	}
	rm.live.mu.Lock()
	rm.live.maxPriority.Store(int32(p))
	rm.live.mu.Unlock()
	rm.log.InfoContext(ctx, "cluster max priority refreshed", "priority", p)
	return nil
}
