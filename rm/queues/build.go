package queues

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/hadoopconf"
)

// Property names and defaults, as CapacitySchedulerConfiguration has them.
const (
	// Prefix starts every CapacityScheduler property.
	Prefix = "yarn.scheduler.capacity."
	// KnitPrefix starts the Knit section: knit.queue.<path>.<setting>.
	KnitPrefix = "knit.queue."

	keyMaxSystemApps      = Prefix + "maximum-applications"
	keyGlobalPerQueueApps = Prefix + "global-queue-max-application"
	keyMaxAMPercent       = Prefix + "maximum-am-resource-percent"
	keyUserLimitFactor    = Prefix + "user-limit-factor"
	keyUserLimit          = Prefix + "minimum-user-limit-percent"
	keyMaxParallelApps    = Prefix + "max-parallel-apps"
	// keyUserPrefix starts the per-user settings:
	// yarn.scheduler.capacity.user.max-parallel-apps for every user,
	// yarn.scheduler.capacity.user.<user>.max-parallel-apps for one.
	keyUserPrefix   = Prefix + "user."
	maxParallelApps = "max-parallel-apps"

	defaultMaxSystemApps   = 10000
	defaultMaxAMPercent    = float32(0.1)
	defaultUserLimitFactor = float32(1)
	defaultUserLimit       = float32(100)
	defaultMaxParallelApps = math.MaxInt32

	// precision is AbstractParentQueue.PRECISION: children's capacities may
	// miss 100% by this much (0.05%).
	precision = float32(0.0005)

	// MaxQueues and MaxDepth bound a configuration Knit accepts: far above
	// any real hierarchy, they keep a hostile one from costing more than a
	// few megabytes.
	MaxQueues = 10000
	MaxDepth  = 64
)

// Knit section settings, after knit.queue.<path>.
const (
	knitNamespace     = "namespace"
	knitSchedulerName = "scheduler-name"
	knitPriorityClass = "priority-class"
	knitPodTemplate   = "pod-template"
	knitDelegate      = "delegate"
	knitDelegateQueue = "delegate-queue"
)

// Options are what a Tree needs besides the configuration.
type Options struct {
	// DefaultNamespace is root's namespace when knit.queue.root.namespace
	// is unset; empty means "default".
	DefaultNamespace string
	// Groups looks up a user's groups when a caller passes none; nil means
	// users belong to no groups.
	Groups func(user string) []string
	// ACLsEnabled is yarn.acl.enable: without it, submissions and
	// application access skip the ACL checks (queue ACLs are still
	// reported by UserACLs, as YARN does).
	ACLsEnabled bool
	// AdminACL is yarn.admin.acl (YARN's default is "*"); admins may
	// access every application.
	AdminACL acl.ACL
	// Preemption is whether the scheduler monitor takes containers back
	// (yarn.resourcemanager.scheduler.monitor.enable with the
	// ProportionalCapacityPreemptionPolicy), and IntraQueuePreemption
	// whether it does within leaves
	// (...preemption.intra-queue-preemption.enabled): without them every
	// queue's preemption is disabled, as the CapacityScheduler reports it.
	Preemption, IntraQueuePreemption bool
}

// builder carries one Build's state.
type builder struct {
	c      *hadoopconf.Configuration
	opts   Options
	queues []*Queue

	maxSystemApps   int
	globalPerQueue  int
	maxAMPercent    float32
	userLimitFactor float32
	userLimit       float32
	maxParallelApps int
	// userAppsDefault and userApps are the users' max-parallel-apps.
	userAppsDefault int
	userApps        map[string]int
	// labelsByQueue are the partitions each queue's configuration names
	// (configuredLabels).
	labelsByQueue map[string][]string
}

// Build reads the queue hierarchy from c (capacity-scheduler.xml, usually
// merged over yarn-site.xml as the CapacityScheduler does) and checks it as
// the CapacityScheduler does when it starts. A refusal is a *ConfigError
// with the CapacityScheduler's message.
func Build(c *hadoopconf.Configuration, opts Options) (*Tree, error) {
	b := &builder{c: c, opts: opts, labelsByQueue: configuredLabels(c.Names())}
	var err error
	if b.maxSystemApps, err = c.GetInt(keyMaxSystemApps, defaultMaxSystemApps); err != nil {
		return nil, configError(err)
	}
	if b.globalPerQueue, err = c.GetInt(keyGlobalPerQueueApps, -1); err != nil {
		return nil, configError(err)
	}
	if b.maxAMPercent, err = c.GetFloat(keyMaxAMPercent, defaultMaxAMPercent); err != nil {
		return nil, configError(err)
	}
	if b.userLimitFactor, err = c.GetFloat(keyUserLimitFactor, defaultUserLimitFactor); err != nil {
		return nil, configError(err)
	}
	if b.userLimit, err = c.GetFloat(keyUserLimit, defaultUserLimit); err != nil {
		return nil, configError(err)
	}
	if b.maxParallelApps, err = c.GetInt(keyMaxParallelApps, defaultMaxParallelApps); err != nil {
		return nil, configError(err)
	}
	if err := b.userLimits(); err != nil {
		return nil, err
	}
	root, err := b.parse(nil, "root", 0)
	if err != nil {
		return nil, err
	}
	t := newTree(root, b.queues, opts, b)
	t.warnings = append(unknownQueueWarnings(c, t), unqueuedWarnings(b.queues)...)
	return t, nil
}

// unqueuedWarnings lists the leaves delegated to Volcano whose pods go to
// the default scheduler: Knit holds none of them back and the default
// scheduler reads no Volcano queue, so nothing queues them. (YuniKorn's
// admission controller sends the pods it queues to its scheduler; Kueue
// holds them back with a gate of its own.)
func unqueuedWarnings(qs []*Queue) []string {
	var out []string
	for _, q := range qs {
		if q.IsLeaf() && q.Kube.Delegate == DelegateVolcano && q.Kube.SchedulerName == "" {
			out = append(out, KnitPrefix+q.Path+"."+knitDelegate+"="+DelegateVolcano+" with no "+knitSchedulerName+
				": its pods go to the default scheduler, which reads no Volcano queue, and Knit holds none back")
		}
	}
	return out
}

// userLimits reads the users' max-parallel-apps, as
// CapacitySchedulerConfiguration.getMaxParallelAppsForUser does: a user's
// own, else the default for every user, else no limit.
func (b *builder) userLimits() error {
	var err error
	if b.userAppsDefault, err = b.c.GetInt(keyUserPrefix+maxParallelApps, defaultMaxParallelApps); err != nil {
		return configError(err)
	}
	for _, name := range b.c.Names() {
		rest, ok := strings.CutPrefix(name, keyUserPrefix)
		if !ok {
			continue
		}
		user, ok := strings.CutSuffix(rest, "."+maxParallelApps)
		if !ok || user == "" {
			continue
		}
		n, err := b.c.GetInt(name, defaultMaxParallelApps)
		if err != nil {
			return configError(err)
		}
		if b.userApps == nil {
			b.userApps = map[string]int{}
		}
		b.userApps[user] = n
	}
	return nil
}

func configError(err error) *ConfigError {
	return &ConfigError{Message: err.Error(), Err: err}
}

func invalid(format string, args ...any) *ConfigError {
	return &ConfigError{Message: fmt.Sprintf(format, args...)}
}

// parse builds one queue and, depth first, its children, in the order
// CapacitySchedulerQueueManager.parseQueue does: the queue's own settings,
// then its children, then the check of the children's capacities.
func (b *builder) parse(parent *Queue, name string, depth int) (*Queue, error) {
	q := &Queue{Name: name, Path: name, Parent: parent}
	if parent != nil {
		q.Path = parent.Path + "." + name
	}
	if len(b.queues) >= MaxQueues {
		return nil, invalid("more than %d queues", MaxQueues)
	}
	if depth > MaxDepth {
		return nil, invalid("queue %s is nested deeper than %d levels", q.Path, MaxDepth)
	}
	b.queues = append(b.queues, q)
	children, err := b.childNames(q)
	if err != nil {
		return nil, err
	}
	if len(children) == 0 && parent == nil {
		return nil, invalid("Queue configuration missing child queue names for %s", name)
	}
	for _, step := range []func(*Queue, bool) error{
		b.capacities, b.state, b.acls, b.limits, b.ordering, b.preemption, b.labels, b.partitions, b.kube,
	} {
		if err := step(q, len(children) == 0); err != nil {
			return nil, err
		}
	}
	for _, child := range children {
		cq, err := b.parse(q, child, depth+1)
		if err != nil {
			return nil, err
		}
		q.Children = append(q.Children, cq)
	}
	if len(q.Children) > 0 {
		if err := b.checkChildCapacities(q); err != nil {
			return nil, err
		}
	}
	return q, nil
}

func (b *builder) key(q *Queue, suffix string) string { return Prefix + q.Path + "." + suffix }

// childNames reads <path>.queues: comma-separated, trimmed, empty items
// skipped (as Hadoop's StringTokenizer-based getStrings does).
func (b *builder) childNames(q *Queue) ([]string, error) {
	key := b.key(q, "queues")
	v, ok, err := b.c.Lookup(key)
	if err != nil || !ok {
		return nil, configErrorOrNil(err)
	}
	var names []string
	seen := map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
			continue
		case strings.Contains(n, "."):
			return nil, invalid("Illegal queue name %s in %s: queue names cannot contain '.'", n, key)
		case seen[n]:
			return nil, invalid("Queue %s is listed twice in %s", n, key)
		}
		seen[n] = true
		names = append(names, n)
	}
	return names, nil
}

func configErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return configError(err)
}

// capacities reads capacity and maximum-capacity as percentages and checks
// them as CapacitySchedulerConfiguration and CSQueueUtils do. Root's
// capacity is always 100%.
func (b *builder) capacities(q *Queue, _ bool) error {
	capacity := float32(100)
	if q.Parent != nil {
		c, ok, err := b.percent(q, "capacity")
		if err != nil {
			return err
		}
		capacity = 0
		if ok {
			capacity = c
		}
		if math.IsNaN(float64(capacity)) || capacity < 0 || capacity > 100 {
			return invalid("Illegal capacity of %s for queue %s", javaFloat(capacity), q.Path)
		}
	}
	maxCapacity := float32(100)
	if m, ok, err := b.percent(q, "maximum-capacity"); err != nil {
		return err
	} else if ok && m != -1 {
		if math.IsNaN(float64(m)) || m < 0 || m > 100 {
			return invalid("Illegal maximum-capacity of %s for queue %s", javaFloat(m), q.Path)
		}
		maxCapacity = m
	}
	q.Capacity = capacity / 100
	q.MaximumCapacity = maxCapacity / 100
	parentAbs, parentAbsMax := float32(1), float32(1)
	if q.Parent != nil {
		parentAbs, parentAbsMax = q.Parent.AbsoluteCapacity, q.Parent.AbsoluteMaximumCapacity
	}
	var err error
	q.AbsoluteCapacity, q.AbsoluteMaximumCapacity, err = absolute(q.Capacity, q.MaximumCapacity, parentAbs, parentAbsMax, q.Path, "")
	return err
}

// absolute is a queue's capacity and maximum capacity in one partition
// (label "" for the default) as fractions of the partition's whole, from
// its own and its parent's; a capacity above the maximum is refused as
// CSQueueUtils.checkAbsoluteCapacity refuses it.
func absolute(capacity, maximum, parentAbs, parentAbsMax float32, path, label string) (abs, absMax float32, err error) {
	if capacity > 0 {
		abs = capacity * parentAbs
	}
	if maximum > 0 {
		absMax = maximum * parentAbsMax
	}
	if abs > absMax {
		return abs, absMax, invalid("Illegal queue capacity setting (abs-capacity=%s) > (abs-maximum-capacity=%s) for queue=[%s],label=[%s]",
			javaFloat(abs), javaFloat(absMax), path, label)
	}
	return abs, absMax, nil
}

// percent reads a capacity property. Absolute resources ("[memory=...]")
// and weights ("2w") are CapacityScheduler modes Knit does not have yet.
func (b *builder) percent(q *Queue, suffix string) (float32, bool, error) {
	key := b.key(q, suffix)
	v, ok, err := b.c.Lookup(key)
	if err != nil || !ok {
		return 0, false, configErrorOrNil(err)
	}
	s := strings.TrimSpace(v)
	if strings.HasPrefix(s, "[") || strings.HasSuffix(s, "w") {
		return 0, false, invalid("%s=%s: absolute resource and weight capacities are not supported; use a percentage", key, v)
	}
	f, err := hadoopconf.ParseJavaFloat(s)
	if err != nil {
		return 0, false, &ConfigError{Message: fmt.Sprintf("%s: %v", key, err), Err: err}
	}
	return f, true, nil
}

// state is AbstractCSQueue.initializeQueueState for a new queue: the
// configured state, else the parent's (a draining parent's children are
// stopped); a running queue under a queue that is not running is refused.
func (b *builder) state(q *Queue, _ bool) error {
	v, ok, err := b.c.Lookup(b.key(q, "state"))
	if err != nil {
		return configError(err)
	}
	var configured State
	if ok {
		// QueueState.valueOf(toUpperCase(v)): no trimming.
		switch strings.ToUpper(v) {
		case "RUNNING":
			configured = Running
		case "STOPPED":
			configured = Stopped
		case "DRAINING":
			return invalid("Invalid queue state configuration. We can only use RUNNING or STOPPED.")
		default:
			return invalid("No enum constant org.apache.hadoop.yarn.api.records.QueueState.%s", strings.ToUpper(v))
		}
	}
	switch {
	case q.Parent == nil:
		q.State = Running
		if configured != 0 {
			q.State = configured
		}
	case configured == 0:
		q.State = q.Parent.State
		if q.State == Draining {
			q.State = Stopped
		}
	case configured == Running && q.Parent.State != Running:
		return invalid("The parent queue:%s cannot be STOPPED as the child queue:%s is in RUNNING state.", q.Parent.Path, q.Path)
	default:
		q.State = configured
	}
	return nil
}

// acls reads the two queue ACLs; root's default to everyone, other queues'
// to nobody (they inherit through Tree.HasAccess, not here).
func (b *builder) acls(q *Queue, _ bool) error {
	def := " "
	if q.Parent == nil {
		def = "*"
	}
	for _, a := range queueACLs() {
		// Get, not GetTrimmed: " " means nobody.
		v, err := b.c.Get(b.key(q, a.key()), def)
		if err != nil {
			return configError(err)
		}
		if a == SubmitApplications {
			q.SubmitACL = acl.Parse(v)
		} else {
			q.AdministerACL = acl.Parse(v)
		}
	}
	return nil
}

// limits reads the application limits. For a leaf, the maximum
// applications follow AbstractLeafQueue.updateMaximumApplications and
// updateMaxAppsPerUser, in float arithmetic as Java does.
func (b *builder) limits(q *Queue, leaf bool) error {
	var err error
	geti := func(dst *int, suffix string, def int) {
		if err == nil {
			*dst, err = b.c.GetInt(b.key(q, suffix), def)
		}
	}
	getf := func(dst *float32, suffix string, def float32) {
		if err == nil {
			*dst, err = b.c.GetFloat(b.key(q, suffix), def)
		}
	}
	var maxApps int
	geti(&maxApps, "maximum-applications", -1)
	getf(&q.MaxAMResourcePercent, "maximum-am-resource-percent", b.maxAMPercent)
	getf(&q.UserLimitFactor, "user-limit-factor", b.userLimitFactor)
	getf(&q.MinimumUserLimitPercent, "minimum-user-limit-percent", b.userLimit)
	geti(&q.DefaultApplicationPriority, "default-application-priority", 0)
	geti(&q.Priority, "priority", 0)
	geti(&q.MaxParallelApps, "max-parallel-apps", b.maxParallelApps)
	if err != nil {
		return configError(err)
	}
	if !leaf {
		return nil
	}
	if maxApps < 0 {
		base := b.maxSystemApps
		if b.globalPerQueue > 0 {
			base = min(b.globalPerQueue, b.maxSystemApps)
			maxApps = base
		} else {
			maxApps = javaInt(float32(base) * q.AbsoluteCapacity)
		}
	}
	q.MaxApplications = maxApps
	q.MaxApplicationsPerUser = maxApps
	if q.UserLimitFactor != -1 {
		perUser := javaInt(float32(float32(maxApps)*(q.MinimumUserLimitPercent/100)) * q.UserLimitFactor)
		q.MaxApplicationsPerUser = min(maxApps, perUser)
	}
	return nil
}

// Ordering policies, as CapacitySchedulerConfiguration names them: a
// leaf's of its applications (getAppOrderingPolicy: a name or a class),
// a parent's of its children (getQueueOrderingPolicy: a name alone).
const (
	OrderingFIFO                = "fifo"
	OrderingFair                = "fair"
	OrderingUtilization         = "utilization"
	OrderingPriorityUtilization = "priority-utilization"

	policyPackage = "org.apache.hadoop.yarn.server.resourcemanager.scheduler.policy."
)

// appOrdering names an application ordering policy YARN ships, given by
// name or by class; false for any other.
func appOrdering(v string) (string, bool) {
	switch v {
	case OrderingFIFO, policyPackage + "FifoOrderingPolicy":
		return OrderingFIFO, true
	case OrderingFair, policyPackage + "FairOrderingPolicy":
		return OrderingFair, true
	case "fifo-with-partitions", policyPackage + "FifoOrderingPolicyWithExclusivePartitions":
		return "fifo-with-partitions", true
	case "fifo-for-pending-apps", policyPackage + "FifoOrderingPolicyForPendingApps":
		return "fifo-for-pending-apps", true
	}
	return "", false
}

// ordering reads ordering-policy: for a leaf its applications' (fifo by
// default, not inherited), for a parent its children's (inherited, else
// utilization). A policy YARN cannot construct is refused with its
// message.
func (b *builder) ordering(q *Queue, leaf bool) error {
	v, ok, err := b.c.Lookup(b.key(q, "ordering-policy"))
	if err != nil {
		return configError(err)
	}
	switch {
	case leaf && !ok:
		q.OrderingPolicy = OrderingFIFO
	case leaf:
		// Compared trimmed, as YARN compares the names (it loads a class
		// as written; Knit takes a class trimmed too).
		name, known := appOrdering(strings.TrimSpace(v))
		if !known {
			return invalid("Unable to construct ordering policy for: %s, %s", v, v)
		}
		q.OrderingPolicy = name
	case !ok && q.Parent != nil:
		q.OrderingPolicy = q.Parent.OrderingPolicy
	case !ok:
		q.OrderingPolicy = OrderingUtilization
	default:
		switch name := strings.TrimSpace(v); name {
		case OrderingUtilization, OrderingPriorityUtilization:
			q.OrderingPolicy = name
		default:
			return invalid("Unable to construct queue ordering policy=%s queue=%s", v, q.Path)
		}
	}
	return nil
}

// preemption reads disable_preemption and
// intra-queue-preemption.disable_preemption, each inherited from the
// parent when unset (false at root), as AbstractCSQueue's
// isQueueHierarchyPreemptionDisabled and
// isIntraQueueHierarchyPreemptionDisabled do: with the scheduler monitor
// off every queue's preemption is disabled, and with intra-queue
// preemption off every queue's within it.
func (b *builder) preemption(q *Queue, _ bool) error {
	var parentDisabled, parentIntra bool
	if q.Parent != nil {
		parentDisabled, parentIntra = q.Parent.PreemptionDisabled, q.Parent.intraDisabledInHierarchy
	}
	disabled, err := b.c.GetBool(b.key(q, "disable_preemption"), parentDisabled)
	if err != nil {
		return configError(err)
	}
	intra, err := b.c.GetBool(b.key(q, "intra-queue-preemption.disable_preemption"), parentIntra)
	if err != nil {
		return configError(err)
	}
	q.PreemptionDisabled = !b.opts.Preemption || disabled
	q.intraDisabledInHierarchy = !b.opts.IntraQueuePreemption || intra
	q.IntraQueuePreemptionDisabled = q.intraDisabledInHierarchy || q.PreemptionDisabled
	return nil
}

// labels reads accessible-node-labels and default-node-label-expression,
// inherited from the parent when unset; root may use every label.
func (b *builder) labels(q *Queue, _ bool) error {
	v, ok, err := b.c.Lookup(b.key(q, "accessible-node-labels"))
	if err != nil {
		return configError(err)
	}
	switch {
	case q.Parent == nil:
		q.AccessibleNodeLabels = []string{AnyNodeLabel}
	case !ok:
		q.AccessibleNodeLabels = slices.Clone(q.Parent.AccessibleNodeLabels)
	default:
		labels := hadoopconf.SplitTrimmed(v)
		if slices.Contains(labels, AnyNodeLabel) {
			labels = []string{AnyNodeLabel}
		}
		slices.Sort(labels)
		q.AccessibleNodeLabels = slices.Compact(labels)
	}
	if err := checkAccessibleLabels(q); err != nil {
		return err
	}
	expr, ok, err := b.c.Lookup(b.key(q, "default-node-label-expression"))
	if err != nil {
		return configError(err)
	}
	switch {
	case ok:
		q.DefaultNodeLabelExpression = strings.TrimSpace(expr)
	case q.Parent != nil:
		q.DefaultNodeLabelExpression = q.Parent.DefaultNodeLabelExpression
	}
	return nil
}

// kube reads the Knit section, each setting inherited from the parent.
func (b *builder) kube(q *Queue, _ bool) error {
	if q.Parent != nil {
		q.Kube = q.Parent.Kube
	} else {
		q.Kube.Namespace = b.opts.DefaultNamespace
		if q.Kube.Namespace == "" {
			q.Kube.Namespace = "default"
		}
	}
	for _, s := range []struct {
		name  string
		dst   *string
		check func(string) bool
		what  string
	}{
		{knitNamespace, &q.Kube.Namespace, isDNSLabel, "a Kubernetes namespace name (RFC 1123 label)"},
		{knitSchedulerName, &q.Kube.SchedulerName, isDNSSubdomain, "a Kubernetes scheduler name (RFC 1123 subdomain)"},
		{knitPriorityClass, &q.Kube.PriorityClass, isDNSSubdomain, "a Kubernetes priority class name (RFC 1123 subdomain)"},
		{knitPodTemplate, &q.Kube.PodTemplate, func(string) bool { return true }, ""},
		{knitDelegate, &q.Kube.Delegate, func(v string) bool {
			return v == "" || v == DelegateYuniKorn || v == DelegateVolcano || v == DelegateKueue
		}, "one of yunikorn, volcano, kueue or empty"},
		{knitDelegateQueue, &q.Kube.DelegateQueue, func(v string) bool { return v == "" || isDNSSubdomain(v) || strings.HasPrefix(v, "root") }, "a queue name of the delegate"},
	} {
		key := KnitPrefix + q.Path + "." + s.name
		v, ok, err := b.c.Lookup(key)
		if err != nil {
			return configError(err)
		}
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if !s.check(v) {
			return invalid("%s=%q is not %s", key, v, s.what)
		}
		*s.dst = v
	}
	return nil
}

// checkChildCapacities is AbstractParentQueue.setChildQueues for children
// configured in percent: their capacities must add up to 100% (or to 0%
// when the parent's is 0% or allow-zero-capacity-sum is set), within 0.05%,
// in the default partition and in each the parent's configuration names.
func (b *builder) checkChildCapacities(q *Queue) error {
	allowZero, err := b.c.GetBool(b.key(q, "allow-zero-capacity-sum"), false)
	if err != nil {
		return configError(err)
	}
	var sum float32
	for _, c := range q.Children {
		sum += c.Capacity
	}
	if err := childSumError(q, "", sum, q.Capacity, allowZero); err != nil {
		return err
	}
	return b.checkChildPartitionCapacities(q, allowZero)
}

// isDNSLabel reports whether s is an RFC 1123 label, as a namespace name
// must be.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

// isDNSSubdomain reports whether s is an RFC 1123 subdomain, as scheduler and
// priority class names must be.
func isDNSSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if !isDNSLabel(label) {
			return false
		}
	}
	return true
}
