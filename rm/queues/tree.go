package queues

import (
	"errors"
	"slices"
	"strings"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/hadoopconf"
)

// Tree is a validated queue hierarchy. It is immutable, so any number of
// goroutines may use it; a refresh builds a new Tree (Reload) and the caller
// swaps it in atomically.
type Tree struct {
	root          *Queue
	queues        []*Queue // depth first, children in configured order
	byPath        map[string]*Queue
	byShort       map[string][]*Queue
	opts          Options
	maxSystemApps int
	// userApps are the users' max-parallel-apps: userAppsDefault for
	// every user without one of its own in userApps.
	userAppsDefault int
	userApps        map[string]int
	warnings        []string
}

func newTree(root *Queue, queues []*Queue, opts Options, b *builder) *Tree {
	t := &Tree{
		root:            root,
		queues:          queues,
		byPath:          map[string]*Queue{},
		byShort:         map[string][]*Queue{},
		opts:            opts,
		maxSystemApps:   b.maxSystemApps,
		userAppsDefault: b.userAppsDefault,
		userApps:        b.userApps,
	}
	for _, q := range queues {
		t.byPath[q.Path] = q
		// root is only ever its own path (CSQueueStore protects it).
		if q.Parent != nil {
			t.byShort[q.Name] = append(t.byShort[q.Name], q)
		}
	}
	return t
}

// Root returns the root queue.
func (t *Tree) Root() *Queue { return t.root }

// Queues returns every queue, depth first with children in configured
// order, as getQueueUserAcls lists them. The caller owns the slice, not the
// queues.
func (t *Tree) Queues() []*Queue { return slices.Clone(t.queues) }

// MaxSystemApplications is yarn.scheduler.capacity.maximum-applications:
// the most unfinished applications the cluster takes.
func (t *Tree) MaxSystemApplications() int { return t.maxSystemApps }

// MaxParallelAppsOfUser is the most applications of user that run at
// once, in every queue together: yarn.scheduler.capacity.user.<user>.max-parallel-apps,
// else yarn.scheduler.capacity.user.max-parallel-apps, else
// math.MaxInt32 (no limit), as a queue's MaxParallelApps. Over it, the
// user's next application waits, accepted, as CSMaxRunningAppsEnforcer
// keeps it from running.
func (t *Tree) MaxParallelAppsOfUser(user string) int {
	if n, ok := t.userApps[user]; ok {
		return n
	}
	return t.userAppsDefault
}

// Warnings lists properties that name queues the hierarchy does not have
// (often left behind by a removed queue, which the CapacityScheduler
// ignores silently) and unknown Knit settings. The caller owns the slice.
func (t *Tree) Warnings() []string { return slices.Clone(t.warnings) }

// Lookup finds a queue by full path ("root.a.b") or by short name ("b")
// when exactly one queue has it, as the CapacityScheduler's queue store
// does. It fails with a *LookupError wrapping ErrUnknownQueue or
// ErrAmbiguousQueue.
func (t *Tree) Lookup(name string) (*Queue, error) {
	if q, ok := t.byPath[name]; ok {
		return q, nil
	}
	switch qs := t.byShort[name]; len(qs) {
	case 0:
		return nil, &LookupError{Name: name, Err: ErrUnknownQueue}
	case 1:
		return qs[0], nil
	default:
		paths := make([]string, len(qs))
		for i, q := range qs {
			paths[i] = q.Path
		}
		return nil, &LookupError{Name: name, Candidates: paths, Err: ErrAmbiguousQueue}
	}
}

// groups returns the groups a caller gave, or looks them up.
func (t *Tree) groups(user string, groups []string) []string {
	if groups == nil && t.opts.Groups != nil {
		return t.opts.Groups(user)
	}
	return groups
}

// HasAccess reports whether the user may perform acl on the named queue: a
// user allowed on the queue or on any of its ancestors is allowed, as
// ConfiguredYarnAuthorizer checks. groups nil means Options.Groups(user). A
// name that finds no single queue allows nothing.
func (t *Tree) HasAccess(queue string, acl QueueACL, user string, groups []string) bool {
	q, err := t.Lookup(queue)
	if err != nil {
		return false
	}
	return t.hasAccess(q, acl, user, t.groups(user, groups))
}

func (t *Tree) hasAccess(q *Queue, acl QueueACL, user string, groups []string) bool {
	for ; q != nil; q = q.Parent {
		if q.ACL(acl).Allows(user, groups) {
			return true
		}
	}
	return false
}

// IsAdmin reports whether yarn.admin.acl (Options.AdminACL) allows the user.
// AdminService checks it on every call whether or not yarn.acl.enable is
// on; application access checks it only with ACLs on. groups nil means
// Options.Groups(user).
func (t *Tree) IsAdmin(user string, groups []string) bool {
	return t.opts.AdminACL.Allows(user, t.groups(user, groups))
}

// UserGroups returns the user's groups as the ResourceManager sees them
// (Options.Groups), for getGroupsForUser. The caller owns the slice.
func (t *Tree) UserGroups(user string) []string {
	return slices.Clone(t.groups(user, nil))
}

// WithAdminACL returns a Tree like t with acl as yarn.admin.acl, for
// refreshAdminAcls; t is unchanged and the queues are shared, being
// immutable.
func (t *Tree) WithAdminACL(acl acl.ACL) *Tree {
	next := *t
	next.opts.AdminACL = acl
	return &next
}

// AppAccess asks whether a user may view or modify an application.
type AppAccess struct {
	// Queue is the application's queue as recorded with it.
	Queue string
	// Owner is the user who submitted the application.
	Owner string
	// ACL is the application's ACL for the operation (VIEW_APP or
	// MODIFY_APP from its launch context); the zero ACL allows nobody.
	ACL acl.ACL
	// User asks; Groups are theirs (nil: Options.Groups).
	User   string
	Groups []string
}

// CheckAppAccess decides an application access as ClientRMService does
// (ApplicationACLsManager, then QueueACLsManager): everyone when ACLs are
// off; else admins, the owner, users on the application's ACL, and
// administrators of its queue. An application whose queue no longer exists
// stays accessible (YARN logs and allows); one whose queue name became
// ambiguous is not.
func (t *Tree) CheckAppAccess(a AppAccess) bool {
	if !t.opts.ACLsEnabled {
		return true
	}
	groups := t.groups(a.User, a.Groups)
	if t.opts.AdminACL.Allows(a.User, groups) || a.User == a.Owner || a.ACL.Allows(a.User, groups) {
		return true
	}
	q, err := t.Lookup(a.Queue)
	if err != nil {
		return errors.Is(err, ErrUnknownQueue)
	}
	return t.hasAccess(q, AdministerQueue, a.User, groups)
}

// knownSuffixes are the per-queue CapacityScheduler properties (one dot-free
// suffix) whose queue path Warnings checks.
func knownSuffixes() []string {
	return []string{
		"queues", "capacity", "maximum-capacity", "state", "acl_submit_applications",
		"acl_administer_queue", "maximum-applications", "maximum-am-resource-percent",
		"user-limit-factor", "minimum-user-limit-percent", "default-application-priority",
		"priority", "max-parallel-apps", "accessible-node-labels",
		"default-node-label-expression", "ordering-policy", "disable_preemption",
		"maximum-allocation-mb",
		"maximum-allocation-vcores", "maximum-allocation", "allow-zero-capacity-sum",
		"maximum-application-lifetime", "default-application-lifetime",
	}
}

// unknownQueueWarnings lists properties whose queue path is not in t, and
// Knit settings that do not exist.
func unknownQueueWarnings(c *hadoopconf.Configuration, t *Tree) []string {
	var out []string
	knit := []string{knitNamespace, knitSchedulerName, knitPriorityClass, knitPodTemplate, knitDelegate, knitDelegateQueue}
	for _, name := range c.Names() {
		if rest, ok := strings.CutPrefix(name, Prefix); ok && strings.HasPrefix(rest, "root.") {
			i := strings.LastIndexByte(rest, '.')
			path, suffix := rest[:i], rest[i+1:]
			// intra-queue-preemption.disable_preemption is the one known
			// property of two parts.
			if suffix == "disable_preemption" {
				path = strings.TrimSuffix(path, ".intra-queue-preemption")
			}
			if slices.Contains(knownSuffixes(), suffix) && t.byPath[path] == nil {
				out = append(out, name+": no queue "+path+" in the hierarchy; ignored")
			}
			continue
		}
		if rest, ok := strings.CutPrefix(name, KnitPrefix); ok {
			i := strings.LastIndexByte(rest, '.')
			if i < 0 {
				out = append(out, name+": not a Knit queue setting (knit.queue.<path>.<setting>); ignored")
				continue
			}
			path, suffix := rest[:i], rest[i+1:]
			switch {
			case !slices.Contains(knit, suffix):
				out = append(out, name+": unknown Knit queue setting "+suffix+" (want one of "+strings.Join(knit, ", ")+"); ignored")
			case t.byPath[path] == nil:
				out = append(out, name+": no queue "+path+" in the hierarchy; ignored")
			}
		}
	}
	return out
}
