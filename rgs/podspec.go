package rgs

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
)

// Names inside every Knit pod, which RKS and the controller refer to.
const (
	// LauncherInitContainerName is the init container that copies
	// knit-launcher into the LauncherVolume.
	LauncherInitContainerName = "knit-launcher-install"
	// LauncherVolume is the emptyDir shared by both containers.
	LauncherVolume = "knit"
	// NodeRootVolume is the hostPath of Launcher.NodeRoot.
	NodeRootVolume = "knit-node"
)

const (
	defaultMillicoresPerVcore = 1000
	defaultLauncherMountPath  = "/knit"
	// YARN's yarn.nodemanager.sleep-delay-before-sigkill.ms is 250 ms;
	// Kubernetes counts the grace period in whole seconds.
	defaultGracePeriodSeconds = 1

	// YARN's names of the two resources every capability has.
	yarnMemory = "memory-mb"
	yarnVcores = "vcores"

	// YARN's default partition: the empty name, shown by the RM as
	// "<DEFAULT_PARTITION>".
	yarnDefaultPartition = "<DEFAULT_PARTITION>"
	// The target key of PlacementConstraints.PlacementTargets.nodePartition.
	yarnNodePartitionKey = "yarn_node_partition/"
	// PlacementConstraints.NODE and RACK.
	yarnScopeNode = "node"
	yarnScopeRack = "rack"
	// Allocation tag namespaces (AllocationTagNamespaceType): an unset key
	// is what clients before Hadoop 3.1.1 send for their own application.
	yarnTagsSelf    = "self"
	yarnTagsNotSelf = "not-self"
	yarnTagsAll     = "all"
	yarnTagsAppID   = "app-id/"
)

// Resources says how YARN resources become Kubernetes resources.
type Resources struct {
	// MillicoresPerVcore is the CPU one YARN vcore asks for; zero means
	// 1000 (one vcore, one core).
	MillicoresPerVcore int64
	// Types maps YARN resource type names other than memory-mb and vcores
	// (e.g. "yarn.io/gpu") to Kubernetes resource names (e.g.
	// "nvidia.com/gpu"). A non-zero ask for an unmapped type is an error.
	Types map[string]corev1.ResourceName
}

// Mapping is where and how a queue's pods run, from the queue's Knit
// settings.
type Mapping struct {
	// Namespace is the namespace of the pod; required.
	Namespace string
	// SchedulerName is the pod's schedulerName; empty for the cluster's
	// default scheduler.
	SchedulerName string
	// PriorityClass is the pod's priorityClassName; empty for none.
	PriorityClass string
	// Template holds optional overrides; may be nil. BuildPod takes from it
	// exactly: labels, annotations, tolerations, nodeSelector and affinity
	// (merged with Knit's; Knit's labels, annotations and node selector keys
	// win, and required node affinity terms are ANDed with Knit's), volumes,
	// the first container's env and volumeMounts (added to the main
	// container), imagePullSecrets, serviceAccountName,
	// automountServiceAccountToken (default false: YARN code has no business
	// with the Kubernetes API) and terminationGracePeriodSeconds (default 1 s).
	// BuildPod never modifies it.
	Template *corev1.PodTemplateSpec
	// HostNetwork runs the pod on the node's network, as YARN tasks expect;
	// callers pass true unless the queue says otherwise.
	HostNetwork bool
	// Gated creates the pod with launch.SchedulingGate: it waits for Knit's
	// admission.
	Gated bool
	// Delegate and DelegateQueue, when set, name the batch scheduler that
	// queues the pod and its queue there (queues.DelegateYuniKorn, ...).
	Delegate, DelegateQueue string
}

// What each batch scheduler reads as a pod's queue (and application).
const (
	// YuniKornQueueAnnotation is YuniKorn's queue of a pod.
	YuniKornQueueAnnotation = "yunikorn.apache.org/queue"
	// YuniKornAppIDAnnotation is YuniKorn's application of a pod: without
	// it YuniKorn puts every pod of a namespace in one application of its
	// own making, queued where its first pod asked, so pods of two YARN
	// queues sharing a namespace would share one YuniKorn queue.
	YuniKornAppIDAnnotation = "yunikorn.apache.org/app-id"
	// VolcanoQueueAnnotation is Volcano's queue of a pod.
	VolcanoQueueAnnotation = "scheduling.volcano.sh/queue-name"
	// VolcanoGroupAnnotation names the PodGroup a pod belongs to, the key
	// Volcano's scheduler reads (and its controller, which then makes no
	// PodGroup of the pod's own).
	VolcanoGroupAnnotation = "scheduling.k8s.io/group-name"
	// KueueQueueLabel is Kueue's LocalQueue of a plain pod.
	KueueQueueLabel = "kueue.x-k8s.io/queue-name"
)

// Launcher is the launcher init container and the main container's
// entrypoint: the init container copies knit-launcher from Image into the
// shared emptyDir, and the main container runs it; it waits for its launch
// context (see package rks).
type Launcher struct {
	// Image holds knit-launcher and is, until RKS patches in a Docker image
	// from the launch context, what the main container runs; required.
	Image string
	// InitCommand copies the launcher into MountPath, e.g.
	// ["cp", "/knit-launcher", "/knit/bin/knit-launcher"]; required.
	InitCommand []string
	// Command is the main container's command, e.g.
	// ["/knit/bin/knit-launcher"]; required.
	Command []string
	// MountPath is where the shared emptyDir is mounted in both containers;
	// empty means "/knit".
	MountPath string
	// NodeRoot, if set, is the folder on every node that knit-node shares
	// with pods (launch files, local and log dirs): a hostPath volume
	// mounted at the same path, so a path means the same on both sides.
	NodeRoot string
	// PodUIDEnv, if set, names the variable through which the main
	// container learns its pod's UID, where its launch files appear.
	PodUIDEnv string
}

// PodRequest is one container ask as a pod. BuildPod reads it and never
// modifies it or anything it points to.
type PodRequest struct {
	// Name is the pod name, chosen by the caller; a DNS subdomain.
	Name string
	// App is the application id, e.g. application_1700000000000_0007.
	App string
	// Attempt is the application attempt number.
	Attempt int32
	// Role is launch.RoleAM or launch.RoleTask.
	Role string
	// Queue is the queue path and User the submitting user.
	Queue, User string
	// Ask is the ask: BuildPod reads its priority, capability,
	// resource_name, node_label_expression, execution_type_request and
	// allocation_request_id. It may be nil when SchedulingRequest is set;
	// then priority, capability (resourceSizing.resources), execution type
	// and allocation request id come from the SchedulingRequest and the
	// resource name is "*".
	Ask *yarnpb.ResourceRequestProto
	// Hosts are the Kubernetes node names the ask's resource name resolved
	// to; empty for a rack or "*".
	Hosts []string
	// Rack is the rack of a rack-level ask without its leading "/" (the RM
	// reports rack "/<zone>"); empty otherwise. At most one of Hosts and
	// Rack is set.
	Rack string
	// Strict is true when locality must not be relaxed (relax_locality=false
	// on the ask's ANY or rack level, as the caller resolved it). A strict
	// ask with neither Hosts nor Rack is an error unless its resource name
	// is "*": it would otherwise run anywhere.
	Strict bool
	// Blacklist holds the node names the AM blacklisted; the pod must not
	// run on them.
	Blacklist []string
	// LogAggregation is the application's LogAggregationContext, kept on
	// the pod for its container token and its node; nil for none.
	LogAggregation *yarnpb.LogAggregationContextProto
	// SchedulingRequest is optional: its allocation tags become labels and
	// its placement constraint becomes pod (anti-)affinity or a node
	// selector. A constraint the AM registered for the request's tags
	// (RegisterApplicationMasterRequest.placement_constraints) is the
	// caller's to put here.
	SchedulingRequest *yarnpb.SchedulingRequestProto
	// AllocationTags are more allocation tags for the pod, added to the
	// SchedulingRequest's.
	AllocationTags []string
	// Resources says how the capability becomes Kubernetes resources.
	Resources Resources
	// Mapping is the queue's mapping.
	Mapping Mapping
	// Launcher is the launcher's image and commands.
	Launcher Launcher
	// AskHash is the ask key hash for launch.LabelAsk.
	AskHash string
	// Owner, if set, becomes the pod's only owner reference.
	Owner *metav1.OwnerReference
	// PodGroup, with Mapping.Delegate volcano, is the Volcano PodGroup of
	// the pod's application (VolcanoGroupAnnotation); empty for none.
	PodGroup string
	// SubCluster, if set, is the federation sub-cluster of the RM
	// (launch.LabelSubCluster).
	SubCluster string
	// NodeSelector are the labels of the RM's nodes (Config.NodeSelector):
	// they go into the pod's node selector over the template's.
	NodeSelector map[string]string
}

// BuildPod builds the pending pod for one container ask. It does no I/O and
// keeps no reference to r: the pod shares no memory with the request.
//
// The pod carries the Knit labels (see launch.LabelApplication) and annotations,
// resources with requests equal to limits (in both containers, so the pod
// is Guaranteed), node affinity from the resolved locality and blacklist, a
// node selector from the node label expression, pod (anti-)affinity from
// the placement constraint, the queue's mapping, restartPolicy Never (a
// YARN container runs once), no service links, and the launcher's init and
// main containers.
//
// An error means the request cannot become a pod, whether because it is
// malformed or because Kubernetes cannot express what it asks; the same
// request always fails the same way, so retrying is useless.
func BuildPod(r PodRequest) (*corev1.Pod, error) {
	pod, err := newPod(&r)
	if err != nil {
		return nil, fmt.Errorf("rgs: pod %s/%s: %w", r.Mapping.Namespace, r.Name, err)
	}
	return pod, nil
}

// podAsk is what BuildPod reads of an ask, from a ResourceRequest or a
// SchedulingRequest.
type podAsk struct {
	priority            int32
	resourceName        string
	capability          *yarnpb.ResourceProto
	nodeLabelExpression string
	executionType       yarnpb.ExecutionTypeProto
	allocationRequestID int64
}

func askOf(r *PodRequest) podAsk {
	if a := r.Ask; a != nil {
		name := a.GetResourceName()
		if name == "" {
			name = "*"
		}
		return podAsk{
			priority:            a.GetPriority().GetPriority(),
			resourceName:        name,
			capability:          a.GetCapability(),
			nodeLabelExpression: a.GetNodeLabelExpression(),
			executionType:       a.GetExecutionTypeRequest().GetExecutionType(),
			allocationRequestID: a.GetAllocationRequestId(),
		}
	}
	s := r.SchedulingRequest
	return podAsk{
		priority:            s.GetPriority().GetPriority(),
		resourceName:        "*",
		capability:          s.GetResourceSizing().GetResources(),
		executionType:       s.GetExecutionType().GetExecutionType(),
		allocationRequestID: s.GetAllocationRequestId(),
	}
}

func checkPodRequest(r *PodRequest) error {
	if msgs := validation.IsDNS1123Subdomain(r.Name); len(msgs) > 0 {
		return fmt.Errorf("name %q: %s", r.Name, strings.Join(msgs, "; "))
	}
	if r.Mapping.Namespace == "" {
		return errors.New("no namespace in the queue's mapping")
	}
	if msgs := validation.IsDNS1123Label(r.Mapping.Namespace); len(msgs) > 0 {
		return fmt.Errorf("namespace %q: %s", r.Mapping.Namespace, strings.Join(msgs, "; "))
	}
	switch {
	case r.App == "":
		return errors.New("no application id")
	case r.Role != launch.RoleAM && r.Role != launch.RoleTask:
		return fmt.Errorf("role %q is neither %q nor %q", r.Role, launch.RoleAM, launch.RoleTask)
	case r.Ask == nil && r.SchedulingRequest == nil:
		return errors.New("neither a resource request nor a scheduling request")
	case r.Launcher.Image == "":
		return errors.New("no launcher image")
	case len(r.Launcher.InitCommand) == 0:
		return errors.New("no launcher init command")
	case len(r.Launcher.Command) == 0:
		return errors.New("no launcher command")
	case len(r.Hosts) > 0 && r.Rack != "":
		return fmt.Errorf("both hosts %q and rack %q: a resource name is one or the other", r.Hosts, r.Rack)
	}
	return nil
}

func newPod(r *PodRequest) (*corev1.Pod, error) {
	if err := checkPodRequest(r); err != nil {
		return nil, err
	}
	ask := askOf(r)
	if r.Strict && len(r.Hosts) == 0 && r.Rack == "" && ask.resourceName != "*" {
		return nil, fmt.Errorf("strict locality on %q, which resolved to no node and no rack", ask.resourceName)
	}
	res, err := podResources(ask.capability, r.Resources)
	if err != nil {
		return nil, err
	}
	partition, err := NodePartition(ask.nodeLabelExpression)
	if err != nil {
		return nil, err
	}
	placement, err := placementOf(r.SchedulingRequest.GetPlacementConstraint(), r.App)
	if err != nil {
		return nil, err
	}
	switch {
	case placement.partition == "":
	case partition == "":
		partition = placement.partition
	case partition != placement.partition:
		return nil, fmt.Errorf("node label expression %q and placement constraint partition %q disagree", partition, placement.partition)
	}
	tags, err := tagLabels(r.AllocationTags, r.SchedulingRequest.GetAllocationTags())
	if err != nil {
		return nil, err
	}

	// Work on a copy, so the pod never shares maps or slices with the
	// caller's template.
	tmpl := r.Mapping.Template.DeepCopy()
	if tmpl == nil {
		tmpl = &corev1.PodTemplateSpec{}
	}
	var tc corev1.Container
	if len(tmpl.Spec.Containers) > 0 {
		tc = tmpl.Spec.Containers[0]
	}
	mountPath := r.Launcher.MountPath
	if mountPath == "" {
		mountPath = defaultLauncherMountPath
	}
	volumes := []corev1.Volume{{
		Name:         LauncherVolume,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
	}}
	for _, v := range tmpl.Spec.Volumes {
		if v.Name == LauncherVolume || v.Name == NodeRootVolume {
			return nil, fmt.Errorf("the queue's pod template has a volume named %q, which Knit keeps for itself", v.Name)
		}
		volumes = append(volumes, v)
	}
	mount := corev1.VolumeMount{Name: LauncherVolume, MountPath: mountPath}
	mounts := []corev1.VolumeMount{mount}
	if root := r.Launcher.NodeRoot; root != "" {
		volumes = append(volumes, corev1.Volume{Name: NodeRootVolume, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: root, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}})
		mounts = append(mounts, corev1.VolumeMount{Name: NodeRootVolume, MountPath: root})
	}
	env := slices.Clone(tc.Env)
	if r.Launcher.PodUIDEnv != "" {
		env = append(env, corev1.EnvVar{Name: r.Launcher.PodUIDEnv, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}})
	}

	labels := tmpl.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	annotations := tmpl.Annotations
	if annotations == nil {
		annotations = map[string]string{}
	}
	// A string that is no valid label value is sanitised; the annotation of
	// the same key keeps it exactly.
	setString := func(key, v string) {
		lv := launch.LabelValue(v)
		labels[key] = lv
		if lv != v {
			annotations[key] = v
		}
	}
	setString(launch.LabelApplication, r.App)
	labels[launch.LabelAttempt] = launch.IntLabelValue(int64(r.Attempt))
	labels[launch.LabelRole] = r.Role
	labels[launch.LabelPriority] = launch.IntLabelValue(int64(ask.priority))
	labels[launch.LabelAllocationRequestID] = launch.IntLabelValue(ask.allocationRequestID)
	setString(launch.LabelQueue, r.Queue)
	setString(launch.LabelUser, r.User)
	setString(launch.LabelAsk, r.AskHash)
	if r.SubCluster != "" {
		labels[launch.LabelSubCluster] = r.SubCluster
	}
	for _, t := range tags {
		labels[t] = "true"
	}
	annotations[launch.AnnotationResourceName] = ask.resourceName
	switch r.Mapping.Delegate {
	case "yunikorn":
		annotations[YuniKornQueueAnnotation] = r.Mapping.DelegateQueue
		annotations[YuniKornAppIDAnnotation] = r.App
	case "volcano":
		annotations[VolcanoQueueAnnotation] = r.Mapping.DelegateQueue
		if r.PodGroup != "" {
			annotations[VolcanoGroupAnnotation] = r.PodGroup
		}
	case "kueue":
		labels[KueueQueueLabel] = r.Mapping.DelegateQueue
	}
	var gates []corev1.PodSchedulingGate
	if r.Mapping.Gated && r.Mapping.Delegate == "" {
		gates = []corev1.PodSchedulingGate{{Name: launch.SchedulingGate}}
	}
	annotations[launch.AnnotationExecutionType] = ask.executionType.String()
	if lac, ok := launch.LogAggregationContextOf(r.LogAggregation); ok {
		v, err := launch.EncodeLogAggregationContext(lac)
		if err != nil {
			return nil, err
		}
		annotations[launch.AnnotationLogAggregationContext] = v
	}

	nodeSelector := tmpl.Spec.NodeSelector
	if partition != "" || len(r.NodeSelector) > 0 {
		if nodeSelector == nil {
			nodeSelector = map[string]string{}
		}
		// The RM's pool wins over the template: a pod off the RM's nodes
		// would be a container no knit-node of its relays to.
		for k, v := range r.NodeSelector {
			nodeSelector[k] = v
		}
	}
	if partition != "" {
		nodeSelector[launch.NodeLabelPartition] = partition
	}

	knitAffinity := &corev1.Affinity{NodeAffinity: podNodeAffinity(r.Hosts, r.Rack, r.Strict, r.Blacklist)}
	if len(placement.affinity) > 0 {
		knitAffinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: placement.affinity}
	}
	if len(placement.antiAffinity) > 0 {
		knitAffinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: placement.antiAffinity}
	}

	grace := tmpl.Spec.TerminationGracePeriodSeconds
	if grace == nil {
		grace = ptr.To[int64](defaultGracePeriodSeconds)
	}
	automount := tmpl.Spec.AutomountServiceAccountToken
	if automount == nil {
		automount = ptr.To(false)
	}
	var dnsPolicy corev1.DNSPolicy
	if r.Mapping.HostNetwork {
		// Without it a host-network pod resolves names with the node's
		// resolver and cannot find cluster services.
		dnsPolicy = corev1.DNSClusterFirstWithHostNet
	}
	var owners []metav1.OwnerReference
	if r.Owner != nil {
		owners = []metav1.OwnerReference{*r.Owner.DeepCopy()}
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            r.Name,
			Namespace:       r.Mapping.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: owners,
		},
		Spec: corev1.PodSpec{
			Volumes: volumes,
			InitContainers: []corev1.Container{{
				Name:         LauncherInitContainerName,
				Image:        r.Launcher.Image,
				Command:      slices.Clone(r.Launcher.InitCommand),
				VolumeMounts: []corev1.VolumeMount{mount},
				// Little of the main container's CPU and memory, requests
				// equal to limits so the pod stays Guaranteed: an init
				// container cannot be resized, and the pod's size is the
				// larger of the two, so a container shrunk in place must not
				// be held up by it.
				Resources:                containerResources(launcherResources(res)),
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Containers: []corev1.Container{{
				Name:                     launch.ContainerName,
				Image:                    r.Launcher.Image,
				Command:                  slices.Clone(r.Launcher.Command),
				Env:                      env,
				VolumeMounts:             append(mounts, tc.VolumeMounts...),
				Resources:                containerResources(res),
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: grace,
			DNSPolicy:                     dnsPolicy,
			NodeSelector:                  nodeSelector,
			ServiceAccountName:            tmpl.Spec.ServiceAccountName,
			AutomountServiceAccountToken:  automount,
			HostNetwork:                   r.Mapping.HostNetwork,
			ImagePullSecrets:              tmpl.Spec.ImagePullSecrets,
			Affinity:                      mergeAffinity(tmpl.Spec.Affinity, knitAffinity),
			SchedulerName:                 r.Mapping.SchedulerName,
			Tolerations:                   tmpl.Spec.Tolerations,
			PriorityClassName:             r.Mapping.PriorityClass,
			EnableServiceLinks:            ptr.To(false),
			SchedulingGates:               gates,
		},
	}
	return pod, nil
}

// The launcher init container's most CPU and memory: it copies one binary.
const (
	launcherMaxCPU    = "100m"
	launcherMaxMemory = "64Mi"
)

// launcherResources is the smaller of the main container's CPU and memory
// and the launcher's most.
func launcherResources(res corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, most := range map[corev1.ResourceName]string{corev1.ResourceCPU: launcherMaxCPU, corev1.ResourceMemory: launcherMaxMemory} {
		if q, ok := res[name]; ok {
			if most := resource.MustParse(most); q.Cmp(most) > 0 {
				q = most
			}
			out[name] = q
		}
	}
	return out
}

// containerResources gives a container requests equal to limits, each its
// own copy.
func containerResources(res corev1.ResourceList) corev1.ResourceRequirements {
	if len(res) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Requests: res.DeepCopy(), Limits: res.DeepCopy()}
}

// podResources turns a YARN capability into Kubernetes resources. Memory
// and vcores come from fields 1 and 2 when set: Java clients also send them
// in resource_value_map, and YARN itself reads fields 1 and 2. A zero amount
// is left out; Kubernetes would read a zero limit as no limit anyway.
func podResources(c *yarnpb.ResourceProto, cfg Resources) (corev1.ResourceList, error) {
	perVcore := cfg.MillicoresPerVcore
	if perVcore == 0 {
		perVcore = defaultMillicoresPerVcore
	}
	if perVcore < 0 {
		return nil, fmt.Errorf("millicores per vcore %d is negative", perVcore)
	}
	list := corev1.ResourceList{}
	var memory resource.Quantity
	var vcores int64
	if c.Memory != nil {
		mb := c.GetMemory()
		if mb < 0 || mb > math.MaxInt64>>20 {
			return nil, fmt.Errorf("resource %q: %d MiB is out of range", yarnMemory, mb)
		}
		memory = *resource.NewQuantity(mb<<20, resource.BinarySI)
	}
	if c.VirtualCores != nil {
		vcores = int64(c.GetVirtualCores())
	}
	seen := map[string]bool{}
	for _, ri := range c.GetResourceValueMap() {
		key := ri.GetKey()
		if seen[key] {
			return nil, fmt.Errorf("resource %q appears twice in the capability", key)
		}
		seen[key] = true
		switch key {
		case yarnMemory:
			if c.Memory != nil {
				continue
			}
			units := ri.GetUnits()
			if units == "" {
				units = "Mi" // memory-mb's units in YARN
			}
			q, err := yarnQuantity(key, ri.GetValue(), units)
			if err != nil {
				return nil, err
			}
			memory = q
		case yarnVcores:
			if c.VirtualCores != nil {
				continue
			}
			q, err := yarnQuantity(key, ri.GetValue(), ri.GetUnits())
			if err != nil {
				return nil, err
			}
			vcores = q.Value()
		default:
			// Java sends every resource type the RM announced, zeros
			// included; asking for none of something needs no mapping.
			if ri.GetValue() == 0 {
				continue
			}
			name, ok := cfg.Types[key]
			if !ok {
				return nil, fmt.Errorf("resource type %q is not mapped to a Kubernetes resource", key)
			}
			if name == corev1.ResourceMemory || name == corev1.ResourceCPU {
				return nil, fmt.Errorf("resource type %q maps to %q, which Knit sets from %s and %s", key, name, yarnMemory, yarnVcores)
			}
			if _, dup := list[name]; dup {
				return nil, fmt.Errorf("resource type %q maps to %q, as another type of the capability does", key, name)
			}
			q, err := yarnQuantity(key, ri.GetValue(), ri.GetUnits())
			if err != nil {
				return nil, err
			}
			list[name] = q
		}
	}
	if vcores < 0 {
		return nil, fmt.Errorf("resource %q: negative amount %d", yarnVcores, vcores)
	}
	if perVcore > 0 && vcores > math.MaxInt64/perVcore {
		return nil, fmt.Errorf("resource %q: %d vcores is out of range", yarnVcores, vcores)
	}
	if !memory.IsZero() {
		list[corev1.ResourceMemory] = memory
	}
	if vcores > 0 && perVcore > 0 {
		list[corev1.ResourceCPU] = *resource.NewMilliQuantity(vcores*perVcore, resource.DecimalSI)
	}
	return list, nil
}

// yarnQuantity reads a YARN amount in its units. YARN's units are
// Kubernetes quantity suffixes ("", "k", "M", "Ki", "Mi", "Gi", ...) but for
// pico ("p"), which no Kubernetes resource uses.
func yarnQuantity(key string, value int64, units string) (resource.Quantity, error) {
	if value < 0 {
		return resource.Quantity{}, fmt.Errorf("resource %q: negative amount %d", key, value)
	}
	q, err := resource.ParseQuantity(strconv.FormatInt(value, 10) + units)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("resource %q: units %q are not Kubernetes quantity units", key, units)
	}
	return q, nil
}

// NodePartition turns a node label expression into the partition name for
// the launch.NodeLabelPartition node selector, or "" for the default partition,
// and refuses what one partition cannot express. YARN trims the
// expression; so does Knit.
func NodePartition(expr string) (string, error) {
	e := strings.TrimSpace(expr)
	if e == "" || e == yarnDefaultPartition {
		return "", nil
	}
	if strings.ContainsAny(e, "&|!() \t\r\n") {
		return "", fmt.Errorf("node label expression %q: Knit supports a single partition name", expr)
	}
	if msgs := validation.IsValidLabelValue(e); len(msgs) > 0 {
		return "", fmt.Errorf("node label expression %q: not a Kubernetes label value: %s", expr, strings.Join(msgs, "; "))
	}
	return e, nil
}

// CheckSchedulingRequest reports whether pods can carry a SchedulingRequest's
// allocation tags and placement constraint, without building one: the AM
// service refuses the request before anything changes.
func CheckSchedulingRequest(sr *yarnpb.SchedulingRequestProto) error {
	if _, err := tagLabels(sr.GetAllocationTags()); err != nil {
		return fmt.Errorf("rgs: %w", err)
	}
	if _, err := placementOf(sr.GetPlacementConstraint(), ""); err != nil {
		return fmt.Errorf("rgs: %w", err)
	}
	return nil
}

// tagLabel is the label key of an allocation tag.
func tagLabel(tag string) (string, error) {
	key := launch.TagLabelPrefix + tag
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		return "", fmt.Errorf("allocation tag %q cannot be part of a Kubernetes label name: %s", tag, strings.Join(msgs, "; "))
	}
	return key, nil
}

// tagLabels gives the label keys of the union of the tag lists, sorted.
func tagLabels(lists ...[]string) ([]string, error) {
	var keys []string
	for _, tags := range lists {
		for _, t := range tags {
			key, err := tagLabel(t)
			if err != nil {
				return nil, err
			}
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

// podNodeAffinity turns resolved locality and the blacklist into node
// affinity, or nil when there is neither. Kubernetes allows one value per
// metadata.name requirement, and ORs node selector terms but ANDs the
// requirements within one; so each host is its own term, and each
// blacklisted node is its own NotIn requirement added to every required
// term.
func podNodeAffinity(hosts []string, rack string, strict bool, blacklist []string) *corev1.NodeAffinity {
	var avoid []corev1.NodeSelectorRequirement
	for _, n := range sortedSet(blacklist) {
		avoid = append(avoid, corev1.NodeSelectorRequirement{
			Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpNotIn, Values: []string{n},
		})
	}
	var local []corev1.NodeSelectorTerm
	for _, h := range sortedSet(hosts) {
		local = append(local, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{h},
		}}})
	}
	if rack != "" {
		local = append(local, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{rack},
		}}})
	}
	if len(local) == 0 && len(avoid) == 0 {
		return nil
	}
	na := &corev1.NodeAffinity{}
	var required []corev1.NodeSelectorTerm
	if strict && len(local) > 0 {
		required = local
	} else {
		for _, t := range local {
			na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
				corev1.PreferredSchedulingTerm{Weight: 100, Preference: t})
		}
		if len(avoid) > 0 {
			required = []corev1.NodeSelectorTerm{{}}
		}
	}
	for i := range required {
		required[i].MatchFields = append(required[i].MatchFields, avoid...)
	}
	if len(required) > 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: required}
	}
	return na
}

func sortedSet(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// mergeAffinity adds Knit's affinity k to the template's t (owned by the
// caller): every term of either must hold, so required node selectors are
// ANDed and all other terms appended. It gives nil for no affinity.
func mergeAffinity(t, k *corev1.Affinity) *corev1.Affinity {
	if t == nil {
		t = &corev1.Affinity{}
	}
	if k.NodeAffinity != nil {
		if t.NodeAffinity == nil {
			t.NodeAffinity = &corev1.NodeAffinity{}
		}
		t.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = andNodeSelectors(
			t.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			k.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
		t.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(
			t.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			k.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
	}
	if k.PodAffinity != nil {
		if t.PodAffinity == nil {
			t.PodAffinity = &corev1.PodAffinity{}
		}
		t.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(
			t.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			k.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
	}
	if k.PodAntiAffinity != nil {
		if t.PodAntiAffinity == nil {
			t.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		t.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(
			t.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			k.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
	}
	if *t == (corev1.Affinity{}) {
		return nil
	}
	return t
}

// andNodeSelectors gives the node selector that holds where both a and b
// hold (nil means no constraint): since terms are ORed, that is every term
// of a ANDed with every term of b.
func andNodeSelectors(a, b *corev1.NodeSelector) *corev1.NodeSelector {
	if a == nil || len(a.NodeSelectorTerms) == 0 {
		return b
	}
	if b == nil || len(b.NodeSelectorTerms) == 0 {
		return a
	}
	var terms []corev1.NodeSelectorTerm
	for _, x := range a.NodeSelectorTerms {
		for _, y := range b.NodeSelectorTerms {
			terms = append(terms, corev1.NodeSelectorTerm{
				MatchExpressions: slices.Concat(x.MatchExpressions, y.MatchExpressions),
				MatchFields:      slices.Concat(x.MatchFields, y.MatchFields),
			})
		}
	}
	return &corev1.NodeSelector{NodeSelectorTerms: terms}
}

// podPlacement is what a placement constraint asks of a pod.
type podPlacement struct {
	affinity, antiAffinity []corev1.PodAffinityTerm
	// partition is the node partition of a targetIn(NODE, NodePartition(p))
	// constraint, or "".
	partition string
}

// placementOf turns a placement constraint of application app into pod
// (anti-)affinity. Kubernetes ANDs required affinity terms and has no
// cardinality but "at least one" and "none", so Knit supports simple
// constraints and ANDs of them, with affinity (min 1, no max) or
// anti-affinity (max 0) to allocation tags, and affinity to one node
// partition; anything else is an error naming what Kubernetes cannot
// express.
func placementOf(c *yarnpb.PlacementConstraintProto, app string) (podPlacement, error) {
	var p podPlacement
	err := p.add(c, app)
	return p, err
}

func (p *podPlacement) add(c *yarnpb.PlacementConstraintProto, app string) error {
	switch {
	case c == nil:
		return nil
	case c.SimpleConstraint != nil:
		return p.addSimple(c.SimpleConstraint, app)
	case c.CompositeConstraint != nil:
		cc := c.CompositeConstraint
		if t := cc.GetCompositeType(); t != yarnpb.CompositePlacementConstraintProto_AND {
			return fmt.Errorf("placement constraint: %s of constraints: Kubernetes ANDs affinity terms and cannot express alternatives", t)
		}
		if len(cc.TimedChildConstraints) > 0 {
			return errors.New("placement constraint: timed constraints: Kubernetes affinity has no time window")
		}
		for _, child := range cc.ChildConstraints {
			if err := p.add(child, app); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *podPlacement) addSimple(s *yarnpb.SimplePlacementConstraintProto, app string) error {
	var topologyKey string
	switch scope := s.GetScope(); {
	case strings.EqualFold(scope, yarnScopeNode):
		topologyKey = corev1.LabelHostname
	case strings.EqualFold(scope, yarnScopeRack):
		topologyKey = corev1.LabelTopologyZone
	default:
		return fmt.Errorf("placement constraint: scope %q: Knit supports %q and %q", scope, yarnScopeNode, yarnScopeRack)
	}
	// An unset maximum is unbounded, as PlacementConstraints.targetIn's
	// Integer.MAX_VALUE.
	minC, maxC := s.GetMinCardinality(), int32(math.MaxInt32)
	if s.MaxCardinality != nil {
		maxC = s.GetMaxCardinality()
	}
	var anti bool
	switch {
	case minC <= 0 && maxC == 0:
		anti = true
	case minC == 1 && maxC == math.MaxInt32:
	default:
		maxS := "unbounded"
		if maxC != math.MaxInt32 {
			maxS = strconv.Itoa(int(maxC))
		}
		return fmt.Errorf("placement constraint: cardinality min %d max %s in scope %s: Kubernetes expresses only affinity (min 1, no max) and anti-affinity (max 0)", minC, maxS, s.GetScope())
	}
	if op := s.GetAttributeOpCode(); op == yarnpb.NodeAttributeOpCodeProto_NE {
		return fmt.Errorf("placement constraint: attribute op code %s: Knit supports node attributes only as a node partition", op)
	}
	if len(s.TargetExpressions) == 0 {
		return errors.New("placement constraint: no target expressions")
	}
	for _, t := range s.TargetExpressions {
		switch t.GetTargetType() {
		case yarnpb.PlacementConstraintTargetProto_ALLOCATION_TAG:
			if err := p.addTags(t, topologyKey, anti, app); err != nil {
				return err
			}
		case yarnpb.PlacementConstraintTargetProto_NODE_ATTRIBUTE:
			if t.GetTargetKey() != yarnNodePartitionKey {
				return fmt.Errorf("placement constraint: node attribute %q: Knit supports node attributes only as a node partition", t.GetTargetKey())
			}
			if anti || topologyKey != corev1.LabelHostname || len(t.TargetValues) != 1 {
				return fmt.Errorf("placement constraint: node partition %q: Knit supports a node partition only as targetIn(node, NodePartition(name)) with one name", t.TargetValues)
			}
			part, err := NodePartition(t.TargetValues[0])
			if err != nil {
				return fmt.Errorf("placement constraint: %w", err)
			}
			if p.partition != "" && p.partition != part {
				return fmt.Errorf("placement constraint: node partitions %q and %q: a node is in one partition", p.partition, part)
			}
			p.partition = part
		default:
			return fmt.Errorf("placement constraint: %s target: Knit supports allocation tags and a node partition", t.GetTargetType())
		}
	}
	return nil
}

// addTags adds the terms of one allocation tag target. YARN satisfies a
// target when allocations with any one of its tags are in scope: for
// anti-affinity that is one term per tag (avoid each), but affinity to any
// one of several tags is an OR, which Kubernetes cannot express.
func (p *podPlacement) addTags(t *yarnpb.PlacementConstraintTargetProto, topologyKey string, anti bool, app string) error {
	if len(t.TargetValues) == 0 {
		return errors.New("placement constraint: an allocation tag target with no tags")
	}
	if !anti && len(t.TargetValues) > 1 {
		return fmt.Errorf("placement constraint: affinity to any one of the allocation tags %q: Kubernetes ANDs affinity terms; give each tag its own target", t.TargetValues)
	}
	apps, allNamespaces, err := tagNamespace(t.GetTargetKey(), app)
	if err != nil {
		return err
	}
	for _, tag := range t.TargetValues {
		key, err := tagLabel(tag)
		if err != nil {
			return fmt.Errorf("placement constraint: %w", err)
		}
		term := corev1.PodAffinityTerm{
			LabelSelector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{key: "true"},
				MatchExpressions: slices.Clone(apps),
			},
			TopologyKey: topologyKey,
		}
		if allNamespaces {
			// Other applications may run in other queues' namespaces.
			term.NamespaceSelector = &metav1.LabelSelector{}
		}
		if anti {
			p.antiAffinity = append(p.antiAffinity, term)
		} else {
			p.affinity = append(p.affinity, term)
		}
	}
	return nil
}

// tagNamespace turns an allocation tag namespace into the requirement on
// launch.LabelApplication that selects its applications' pods, and says whether
// those pods may be in any namespace (another application's may be in
// another queue's namespace; this application's are all in one).
func tagNamespace(key, app string) ([]metav1.LabelSelectorRequirement, bool, error) {
	switch {
	case key == "" || key == yarnTagsSelf:
		return []metav1.LabelSelectorRequirement{{
			Key: launch.LabelApplication, Operator: metav1.LabelSelectorOpIn, Values: []string{launch.LabelValue(app)},
		}}, false, nil
	case key == yarnTagsNotSelf:
		return []metav1.LabelSelectorRequirement{{
			Key: launch.LabelApplication, Operator: metav1.LabelSelectorOpNotIn, Values: []string{launch.LabelValue(app)},
		}}, true, nil
	case key == yarnTagsAll:
		return nil, true, nil
	case strings.HasPrefix(key, yarnTagsAppID) && len(key) > len(yarnTagsAppID):
		return []metav1.LabelSelectorRequirement{{
			Key: launch.LabelApplication, Operator: metav1.LabelSelectorOpIn, Values: []string{launch.LabelValue(strings.TrimPrefix(key, yarnTagsAppID))},
		}}, true, nil
	}
	return nil, false, fmt.Errorf("placement constraint: allocation tag namespace %q: Knit supports %s, %s, %s and %s<application id>",
		key, yarnTagsSelf, yarnTagsNotSelf, yarnTagsAll, yarnTagsAppID)
}
