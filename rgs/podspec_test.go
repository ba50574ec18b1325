package rgs

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
)

const (
	testPodName = "app-1700000000000-0007-01-task-x7k2p"
	testApp     = "application_1700000000000_0007"
)

// javaResource is a capability as a Java client writes it: fields 1 and 2
// and the same amounts again in resource_value_map.
func javaResource(mb int64, vcores int32, more ...*yarnpb.ResourceInformationProto) *yarnpb.ResourceProto {
	return &yarnpb.ResourceProto{
		Memory:       proto.Int64(mb),
		VirtualCores: proto.Int32(vcores),
		ResourceValueMap: append([]*yarnpb.ResourceInformationProto{
			resourceInfo("memory-mb", mb, "Mi"),
			resourceInfo("vcores", int64(vcores), ""),
		}, more...),
	}
}

func resourceInfo(key string, value int64, units string) *yarnpb.ResourceInformationProto {
	return &yarnpb.ResourceInformationProto{Key: proto.String(key), Value: proto.Int64(value), Units: proto.String(units)}
}

// testRequest is a plain task ask: 2 GiB, 2 vcores, anywhere.
func testRequest() PodRequest {
	return PodRequest{
		Name:    testPodName,
		App:     testApp,
		Attempt: 1,
		Role:    launch.RoleTask,
		Queue:   "root.default",
		User:    "alice",
		Ask: &yarnpb.ResourceRequestProto{
			Priority:            &yarnpb.PriorityProto{Priority: proto.Int32(20)},
			ResourceName:        proto.String("*"),
			Capability:          javaResource(2048, 2),
			NumContainers:       proto.Int32(3),
			AllocationRequestId: proto.Int64(7),
		},
		Mapping: Mapping{Namespace: "yarn", SchedulerName: "volcano", PriorityClass: "yarn-batch", HostNetwork: true},
		Launcher: Launcher{
			Image:       "ghcr.io/knitdev/knit:1.0",
			InitCommand: []string{"cp", "/knit-launcher", "/knit/bin/knit-launcher"},
			Command:     []string{"/knit/bin/knit-launcher"},
		},
		AskHash: "9f86d081884c7d65",
	}
}

func resources(memory, cpu string) corev1.ResourceRequirements {
	list := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourceCPU: resource.MustParse(cpu)}
	return corev1.ResourceRequirements{Requests: list, Limits: list.DeepCopy()}
}

// testPod is the pod of testRequest.
func testPod() *corev1.Pod {
	mount := []corev1.VolumeMount{{Name: "knit", MountPath: "/knit"}}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      testPodName,
			Namespace: "yarn",
			Labels: map[string]string{
				"knit.io/application":           testApp,
				"knit.io/attempt":               "1",
				"knit.io/role":                  "task",
				"knit.io/priority":              "20",
				"knit.io/allocation-request-id": "7",
				"knit.io/queue":                 "root.default",
				"knit.io/user":                  "alice",
				"knit.io/ask":                   "9f86d081884c7d65",
			},
			Annotations: map[string]string{
				"knit.io/resource-name":  "*",
				"knit.io/execution-type": "GUARANTEED",
			},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "knit", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			InitContainers: []corev1.Container{{
				Name:                     "knit-launcher-install",
				Image:                    "ghcr.io/knitdev/knit:1.0",
				Command:                  []string{"cp", "/knit-launcher", "/knit/bin/knit-launcher"},
				VolumeMounts:             mount,
				Resources:                resources("64Mi", "100m"),
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Containers: []corev1.Container{{
				Name:                     "container",
				Image:                    "ghcr.io/knitdev/knit:1.0",
				Command:                  []string{"/knit/bin/knit-launcher"},
				VolumeMounts:             mount,
				Resources:                resources("2Gi", "2"),
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			DNSPolicy:                     corev1.DNSClusterFirstWithHostNet,
			AutomountServiceAccountToken:  ptr.To(false),
			HostNetwork:                   true,
			SchedulerName:                 "volcano",
			PriorityClassName:             "yarn-batch",
			EnableServiceLinks:            ptr.To(false),
		},
	}
}

func hostTerm(node string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{nodeIs(node)}}
}

func nodeIs(node string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
}

func nodeIsNot(node string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{node}}
}

func zoneIs(zone string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}
}

func preferred(terms ...corev1.NodeSelectorTerm) []corev1.PreferredSchedulingTerm {
	var p []corev1.PreferredSchedulingTerm
	for _, t := range terms {
		p = append(p, corev1.PreferredSchedulingTerm{Weight: 100, Preference: t})
	}
	return p
}

func required(terms ...corev1.NodeSelectorTerm) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: terms}
}

func simple(scope string, minC, maxC int32, targets ...*yarnpb.PlacementConstraintTargetProto) *yarnpb.PlacementConstraintProto {
	return &yarnpb.PlacementConstraintProto{SimpleConstraint: &yarnpb.SimplePlacementConstraintProto{
		Scope: proto.String(scope), MinCardinality: proto.Int32(minC), MaxCardinality: proto.Int32(maxC), TargetExpressions: targets,
	}}
}

// targetIn and targetNotIn are PlacementConstraints.targetIn and targetNotIn.
func targetIn(scope string, targets ...*yarnpb.PlacementConstraintTargetProto) *yarnpb.PlacementConstraintProto {
	return simple(scope, 1, math.MaxInt32, targets...)
}

func targetNotIn(scope string, targets ...*yarnpb.PlacementConstraintTargetProto) *yarnpb.PlacementConstraintProto {
	return simple(scope, 0, 0, targets...)
}

// tags is PlacementTargets.allocationTagWithNamespace; a nil namespace is
// what clients before Hadoop 3.1.1 send.
func tags(namespace *string, values ...string) *yarnpb.PlacementConstraintTargetProto {
	return &yarnpb.PlacementConstraintTargetProto{
		TargetType: yarnpb.PlacementConstraintTargetProto_ALLOCATION_TAG.Enum(), TargetKey: namespace, TargetValues: values,
	}
}

func nodePartitionTarget(names ...string) *yarnpb.PlacementConstraintTargetProto {
	return &yarnpb.PlacementConstraintTargetProto{
		TargetType: yarnpb.PlacementConstraintTargetProto_NODE_ATTRIBUTE.Enum(), TargetKey: proto.String("yarn_node_partition/"), TargetValues: names,
	}
}

func composite(t yarnpb.CompositePlacementConstraintProto_CompositeType, children ...*yarnpb.PlacementConstraintProto) *yarnpb.PlacementConstraintProto {
	return &yarnpb.PlacementConstraintProto{CompositeConstraint: &yarnpb.CompositePlacementConstraintProto{
		CompositeType: t.Enum(), ChildConstraints: children,
	}}
}

func constrained(c *yarnpb.PlacementConstraintProto) *yarnpb.SchedulingRequestProto {
	return &yarnpb.SchedulingRequestProto{PlacementConstraint: c}
}

// tagTerm is the pod affinity term on tag, with the application
// requirement apps and, when anyNamespace, every namespace.
func tagTerm(tag, topologyKey string, anyNamespace bool, apps ...metav1.LabelSelectorRequirement) corev1.PodAffinityTerm {
	t := corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tags.knit.io/" + tag: "true"}, MatchExpressions: apps},
		TopologyKey:   topologyKey,
	}
	if anyNamespace {
		t.NamespaceSelector = &metav1.LabelSelector{}
	}
	return t
}

func appIs(app string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: "knit.io/application", Operator: metav1.LabelSelectorOpIn, Values: []string{app}}
}

// bothContainers gives the main container r and the launcher's init
// container its share of r's CPU and memory, at most 100m and 64Mi.
func bothContainers(p *corev1.Pod, r corev1.ResourceRequirements) {
	p.Spec.InitContainers[0].Resources = containerResources(launcherResources(r.Requests))
	p.Spec.Containers[0].Resources = *r.DeepCopy()
}

func TestBuildPod(t *testing.T) {
	tests := []struct {
		name    string
		request func(*PodRequest)
		want    func(*corev1.Pod)
	}{
		{
			name:    "a task ask becomes a pending pod with Knit's labels, resources, launcher and mapping",
			request: func(*PodRequest) {},
			want:    func(*corev1.Pod) {},
		},
		{
			name: "the application's LogAggregationContext is kept on the pod, only what it set",
			request: func(r *PodRequest) {
				r.LogAggregation = &yarnpb.LogAggregationContextProto{IncludePattern: proto.String("stdout"), RolledLogsIncludePattern: proto.String("syslog")}
			},
			want: func(p *corev1.Pod) {
				p.Annotations[launch.AnnotationLogAggregationContext] = `{"includePattern":"stdout","rolledLogsIncludePattern":"syslog"}`
			},
		},
		{
			name:    "a gated mapping holds the pod back for Knit's admission",
			request: func(r *PodRequest) { r.Mapping.Gated = true },
			want: func(p *corev1.Pod) {
				p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: launch.SchedulingGate}}
			},
		},
		{
			name: "a queue delegated to Kueue names its LocalQueue and is not gated",
			request: func(r *PodRequest) {
				r.Mapping.Gated, r.Mapping.Delegate, r.Mapping.DelegateQueue = true, "kueue", "team-a"
			},
			want: func(p *corev1.Pod) { p.Labels[KueueQueueLabel] = "team-a" },
		},
		{
			name:    "a queue delegated to YuniKorn names its queue and the YARN application as YuniKorn's",
			request: func(r *PodRequest) { r.Mapping.Delegate, r.Mapping.DelegateQueue = "yunikorn", "root.a" },
			want: func(p *corev1.Pod) {
				p.Annotations[YuniKornQueueAnnotation] = "root.a"
				p.Annotations[YuniKornAppIDAnnotation] = p.Labels[launch.LabelApplication]
			},
		},
		{
			name:    "a queue delegated to Volcano names its queue",
			request: func(r *PodRequest) { r.Mapping.Delegate, r.Mapping.DelegateQueue = "volcano", "q1" },
			want:    func(p *corev1.Pod) { p.Annotations[VolcanoQueueAnnotation] = "q1" },
		},
		{
			name: "a pod of a Volcano-delegated queue names its application's PodGroup",
			request: func(r *PodRequest) {
				r.Mapping.Gated, r.Mapping.Delegate, r.Mapping.DelegateQueue = true, "volcano", "q1"
				r.PodGroup = "application-1700000000000-0007"
			},
			want: func(p *corev1.Pod) {
				p.Annotations[VolcanoQueueAnnotation] = "q1"
				p.Annotations[VolcanoGroupAnnotation] = "application-1700000000000-0007"
			},
		},
		{
			name:    "a PodGroup without Volcano's delegation is not named",
			request: func(r *PodRequest) { r.PodGroup = "application-1700000000000-0007" },
			want:    func(*corev1.Pod) {},
		},
		{
			name:    "an AM ask is labelled role am",
			request: func(r *PodRequest) { r.Role = launch.RoleAM },
			want:    func(p *corev1.Pod) { p.Labels[launch.LabelRole] = "am" },
		},
		{
			name: "memory and vcores come from fields 1 and 2 even when the resource map disagrees",
			request: func(r *PodRequest) {
				r.Ask.Capability = &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1), ResourceValueMap: []*yarnpb.ResourceInformationProto{
					resourceInfo("memory-mb", 4096, "Mi"), resourceInfo("vcores", 8, ""),
				}}
			},
			want: func(p *corev1.Pod) { bothContainers(p, resources("1Gi", "1")) },
		},
		{
			name: "memory and vcores fall back to the resource map, memory in Mi unless units say otherwise",
			request: func(r *PodRequest) {
				r.Ask.Capability = &yarnpb.ResourceProto{ResourceValueMap: []*yarnpb.ResourceInformationProto{
					resourceInfo("memory-mb", 512, ""), resourceInfo("vcores", 4, ""),
				}}
			},
			want: func(p *corev1.Pod) { bothContainers(p, resources("512Mi", "4")) },
		},
		{
			name: "resource map memory in Gi is read in Gi",
			request: func(r *PodRequest) {
				r.Ask.Capability = &yarnpb.ResourceProto{ResourceValueMap: []*yarnpb.ResourceInformationProto{
					resourceInfo("memory-mb", 3, "Gi"), resourceInfo("vcores", 1, ""),
				}}
			},
			want: func(p *corev1.Pod) { bothContainers(p, resources("3Gi", "1")) },
		},
		{
			name:    "a vcore is MillicoresPerVcore millicores",
			request: func(r *PodRequest) { r.Resources.MillicoresPerVcore = 250 },
			want:    func(p *corev1.Pod) { bothContainers(p, resources("2Gi", "500m")) },
		},
		{
			name: "a mapped resource type becomes its Kubernetes resource, in its units",
			request: func(r *PodRequest) {
				r.Ask.Capability = javaResource(2048, 2, resourceInfo("yarn.io/gpu", 2, ""), resourceInfo("example.com/scratch", 10, "Gi"))
				r.Resources.Types = map[string]corev1.ResourceName{"yarn.io/gpu": "nvidia.com/gpu", "example.com/scratch": "ephemeral-storage"}
			},
			want: func(p *corev1.Pod) {
				r := resources("2Gi", "2")
				for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
					l["nvidia.com/gpu"] = resource.MustParse("2")
					l["ephemeral-storage"] = resource.MustParse("10Gi")
				}
				bothContainers(p, r)
			},
		},
		{
			name:    "an unmapped resource type asked for zero is ignored, as Java sends every known type",
			request: func(r *PodRequest) { r.Ask.Capability = javaResource(2048, 2, resourceInfo("yarn.io/gpu", 0, "")) },
			want:    func(*corev1.Pod) {},
		},
		{
			name:    "zero memory and vcores leave requests and limits out",
			request: func(r *PodRequest) { r.Ask.Capability = javaResource(0, 0) },
			want:    func(p *corev1.Pod) { bothContainers(p, corev1.ResourceRequirements{}) },
		},
		{
			name: "hosts become preferred node affinity, one term per node",
			request: func(r *PodRequest) {
				r.Ask.ResourceName = proto.String("n2.example.com")
				r.Hosts = []string{"n2", "n1", "n2"}
			},
			want: func(p *corev1.Pod) {
				p.Annotations[launch.AnnotationResourceName] = "n2.example.com"
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: preferred(hostTerm("n1"), hostTerm("n2")),
				}}
			},
		},
		{
			name: "strict hosts become required node affinity, one term per node",
			request: func(r *PodRequest) {
				r.Ask.ResourceName = proto.String("n1.example.com")
				r.Hosts, r.Strict = []string{"n1", "n2"}, true
			},
			want: func(p *corev1.Pod) {
				p.Annotations[launch.AnnotationResourceName] = "n1.example.com"
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: required(hostTerm("n1"), hostTerm("n2")),
				}}
			},
		},
		{
			name:    "a rack becomes preferred node affinity on the zone label",
			request: func(r *PodRequest) { r.Ask.ResourceName = proto.String("/zone-a"); r.Rack = "zone-a" },
			want: func(p *corev1.Pod) {
				p.Annotations[launch.AnnotationResourceName] = "/zone-a"
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: preferred(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zoneIs("zone-a")}}),
				}}
			},
		},
		{
			name: "a strict rack becomes required node affinity on the zone label",
			request: func(r *PodRequest) {
				r.Ask.ResourceName = proto.String("/zone-a")
				r.Rack, r.Strict = "zone-a", true
			},
			want: func(p *corev1.Pod) {
				p.Annotations[launch.AnnotationResourceName] = "/zone-a"
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zoneIs("zone-a")}}),
				}}
			},
		},
		{
			name:    "a strict ask for any node needs no affinity",
			request: func(r *PodRequest) { r.Strict = true },
			want:    func(*corev1.Pod) {},
		},
		{
			name: "the blacklist is ANDed into every required locality term, one node per requirement",
			request: func(r *PodRequest) {
				r.Ask.ResourceName = proto.String("n1.example.com")
				r.Hosts, r.Strict, r.Blacklist = []string{"n1", "n2"}, true, []string{"b2", "b1"}
			},
			want: func(p *corev1.Pod) {
				p.Annotations[launch.AnnotationResourceName] = "n1.example.com"
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: required(
						corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{nodeIs("n1"), nodeIsNot("b1"), nodeIsNot("b2")}},
						corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{nodeIs("n2"), nodeIsNot("b1"), nodeIsNot("b2")}},
					),
				}}
			},
		},
		{
			name: "the blacklist alone is one required term beside preferred locality",
			request: func(r *PodRequest) {
				r.Ask.ResourceName = proto.String("/zone-a")
				r.Rack, r.Blacklist = "zone-a", []string{"b1"}
			},
			want: func(p *corev1.Pod) {
				p.Annotations[launch.AnnotationResourceName] = "/zone-a"
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution:  required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{nodeIsNot("b1")}}),
					PreferredDuringSchedulingIgnoredDuringExecution: preferred(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zoneIs("zone-a")}}),
				}}
			},
		},
		{
			name:    "a node label expression becomes a node selector on knit.io/node-label, trimmed as YARN trims it",
			request: func(r *PodRequest) { r.Ask.NodeLabelExpression = proto.String(" gpu ") },
			want:    func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"knit.io/node-label": "gpu"} },
		},
		{
			name:    "the default partition means no node selector",
			request: func(r *PodRequest) { r.Ask.NodeLabelExpression = proto.String("<DEFAULT_PARTITION>") },
			want:    func(*corev1.Pod) {},
		},
		{
			name: "allocation tags become labels, the scheduling request's and the caller's together",
			request: func(r *PodRequest) {
				r.SchedulingRequest = &yarnpb.SchedulingRequestProto{AllocationTags: []string{"spark-executor", "hbase-rs"}}
				r.AllocationTags = []string{"hbase-rs", "zk"}
			},
			want: func(p *corev1.Pod) {
				p.Labels["tags.knit.io/spark-executor"] = "true"
				p.Labels["tags.knit.io/hbase-rs"] = "true"
				p.Labels["tags.knit.io/zk"] = "true"
			},
		},
		{
			name: "node anti-affinity to a tag of this application becomes required pod anti-affinity per hostname",
			request: func(r *PodRequest) {
				r.SchedulingRequest = constrained(targetNotIn("node", tags(proto.String("self"), "zk")))
				r.SchedulingRequest.AllocationTags = []string{"zk"}
			},
			want: func(p *corev1.Pod) {
				p.Labels["tags.knit.io/zk"] = "true"
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{tagTerm("zk", "kubernetes.io/hostname", false, appIs(testApp))},
				}}
			},
		},
		{
			name:    "rack affinity to a tag with no namespace (pre-3.1.1 clients) becomes required pod affinity per zone in this application",
			request: func(r *PodRequest) { r.SchedulingRequest = constrained(targetIn("rack", tags(nil, "hbase-m"))) },
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{tagTerm("hbase-m", "topology.kubernetes.io/zone", false, appIs(testApp))},
				}}
			},
		},
		{
			name: "an unset maximum cardinality is unbounded",
			request: func(r *PodRequest) {
				c := targetIn("node", tags(nil, "hbase-m"))
				c.SimpleConstraint.MaxCardinality = nil
				r.SchedulingRequest = constrained(c)
			},
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{tagTerm("hbase-m", "kubernetes.io/hostname", false, appIs(testApp))},
				}}
			},
		},
		{
			name:    "anti-affinity to several tags avoids each of them",
			request: func(r *PodRequest) { r.SchedulingRequest = constrained(targetNotIn("node", tags(nil, "a", "b"))) },
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
						tagTerm("a", "kubernetes.io/hostname", false, appIs(testApp)),
						tagTerm("b", "kubernetes.io/hostname", false, appIs(testApp)),
					},
				}}
			},
		},
		{
			name: "an AND of constraints keeps every term",
			request: func(r *PodRequest) {
				r.SchedulingRequest = constrained(composite(yarnpb.CompositePlacementConstraintProto_AND,
					targetNotIn("node", tags(nil, "a")),
					composite(yarnpb.CompositePlacementConstraintProto_AND, targetIn("rack", tags(nil, "b"))),
				))
			},
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{
					PodAffinity: &corev1.PodAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{tagTerm("b", "topology.kubernetes.io/zone", false, appIs(testApp))},
					},
					PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{tagTerm("a", "kubernetes.io/hostname", false, appIs(testApp))},
					},
				}
			},
		},
		{
			name: "tags of all applications match pods of any application in any namespace",
			request: func(r *PodRequest) {
				r.SchedulingRequest = constrained(targetNotIn("node", tags(proto.String("all"), "hdfs")))
			},
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{tagTerm("hdfs", "kubernetes.io/hostname", true)},
				}}
			},
		},
		{
			name: "tags of other applications exclude this one, in any namespace",
			request: func(r *PodRequest) {
				r.SchedulingRequest = constrained(targetNotIn("node", tags(proto.String("not-self"), "hdfs")))
			},
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{tagTerm("hdfs", "kubernetes.io/hostname", true,
						metav1.LabelSelectorRequirement{Key: "knit.io/application", Operator: metav1.LabelSelectorOpNotIn, Values: []string{testApp}})},
				}}
			},
		},
		{
			name: "tags of a named application select that application, in any namespace",
			request: func(r *PodRequest) {
				r.SchedulingRequest = constrained(targetIn("node", tags(proto.String("app-id/application_1700000000000_0001"), "cache")))
			},
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{tagTerm("cache", "kubernetes.io/hostname", true, appIs("application_1700000000000_0001"))},
				}}
			},
		},
		{
			name:    "a node partition target becomes a node selector",
			request: func(r *PodRequest) { r.SchedulingRequest = constrained(targetIn("node", nodePartitionTarget("gpu"))) },
			want:    func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"knit.io/node-label": "gpu"} },
		},
		{
			name: "the RM's pool goes into the node selector, over the template's keys, beside the partition",
			request: func(r *PodRequest) {
				r.Ask.NodeLabelExpression = proto.String("gpu")
				r.NodeSelector = map[string]string{"knit.io/pool": "sc2"}
				r.Mapping.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: map[string]string{"disk": "ssd", "knit.io/pool": "sc1"}}}
			},
			want: func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"disk": "ssd", "knit.io/pool": "sc2", "knit.io/node-label": "gpu"}
			},
		},
		{
			name:    "a federation sub-cluster's pod carries the sub-cluster",
			request: func(r *PodRequest) { r.SubCluster = "sc2" },
			want:    func(p *corev1.Pod) { p.Labels[launch.LabelSubCluster] = "sc2" },
		},
		{
			name: "a node partition target may repeat the node label expression",
			request: func(r *PodRequest) {
				r.Ask.NodeLabelExpression = proto.String("gpu")
				r.SchedulingRequest = constrained(targetIn("node", nodePartitionTarget("gpu")))
			},
			want: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"knit.io/node-label": "gpu"} },
		},
		{
			name: "a scheduling request alone gives priority, capability, execution type and allocation request id",
			request: func(r *PodRequest) {
				r.Ask = nil
				r.SchedulingRequest = &yarnpb.SchedulingRequestProto{
					AllocationRequestId: proto.Int64(3),
					Priority:            &yarnpb.PriorityProto{Priority: proto.Int32(5)},
					ExecutionType:       &yarnpb.ExecutionTypeRequestProto{ExecutionType: yarnpb.ExecutionTypeProto_OPPORTUNISTIC.Enum()},
					ResourceSizing:      &yarnpb.ResourceSizingProto{NumAllocations: proto.Int32(4), Resources: javaResource(1024, 1)},
				}
			},
			want: func(p *corev1.Pod) {
				p.Labels[launch.LabelPriority] = "5"
				p.Labels[launch.LabelAllocationRequestID] = "3"
				p.Annotations[launch.AnnotationExecutionType] = "OPPORTUNISTIC"
				bothContainers(p, resources("1Gi", "1"))
			},
		},
		{
			name: "an opportunistic ask is annotated as such",
			request: func(r *PodRequest) {
				r.Ask.ExecutionTypeRequest = &yarnpb.ExecutionTypeRequestProto{ExecutionType: yarnpb.ExecutionTypeProto_OPPORTUNISTIC.Enum()}
			},
			want: func(p *corev1.Pod) { p.Annotations[launch.AnnotationExecutionType] = "OPPORTUNISTIC" },
		},
		{
			name: "negative numbers are labelled with neg, as an unset allocation request id reads -1",
			request: func(r *PodRequest) {
				r.Ask.AllocationRequestId = nil
				r.Ask.Priority.Priority = proto.Int32(-2)
			},
			want: func(p *corev1.Pod) {
				p.Labels[launch.LabelAllocationRequestID] = "neg1"
				p.Labels[launch.LabelPriority] = "neg2"
			},
		},
		{
			name:    "an empty resource name is any node",
			request: func(r *PodRequest) { r.Ask.ResourceName = nil },
			want:    func(*corev1.Pod) {},
		},
		{
			name:    "a queue and a user that are no label values are sanitised, and kept exactly in annotations",
			request: func(r *PodRequest) { r.Queue, r.User = "root.data science", "hdfs/nn1.example.com@EXAMPLE.COM" },
			want: func(p *corev1.Pod) {
				p.Labels[launch.LabelQueue] = "root.data_science"
				p.Labels[launch.LabelUser] = "hdfs_nn1.example.com_EXAMPLE.COM"
				p.Annotations[launch.LabelQueue] = "root.data science"
				p.Annotations[launch.LabelUser] = "hdfs/nn1.example.com@EXAMPLE.COM"
			},
		},
		{
			name:    "without the host network the DNS policy is left to Kubernetes",
			request: func(r *PodRequest) { r.Mapping.HostNetwork = false },
			want:    func(p *corev1.Pod) { p.Spec.HostNetwork, p.Spec.DNSPolicy = false, "" },
		},
		{
			name:    "the launcher's mount path is configurable",
			request: func(r *PodRequest) { r.Launcher.MountPath = "/opt/knit" },
			want: func(p *corev1.Pod) {
				p.Spec.InitContainers[0].VolumeMounts[0].MountPath = "/opt/knit"
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "knit", MountPath: "/opt/knit"}}
			},
		},
		{
			name: "an owner reference is copied onto the pod",
			request: func(r *PodRequest) {
				r.Owner = &metav1.OwnerReference{APIVersion: "knit.io/v1", Kind: "YarnApplication", Name: "application-1700000000000-0007", UID: "u-1", Controller: ptr.To(true)}
			},
			want: func(p *corev1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "knit.io/v1", Kind: "YarnApplication", Name: "application-1700000000000-0007", UID: "u-1", Controller: ptr.To(true)}}
			},
		},
		{
			name: "the queue's template is merged in and Knit's labels and node selector win",
			request: func(r *PodRequest) {
				r.Ask.NodeLabelExpression = proto.String("gpu")
				r.SchedulingRequest = constrained(targetNotIn("node", tags(nil, "zk")))
				r.Mapping.Template = &corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{
						Labels:      map[string]string{"team": "data", launch.LabelRole: "not-knit's"},
						Annotations: map[string]string{"koordinator.sh/qos": "BE"},
					},
					Spec: corev1.PodSpec{
						Volumes:            []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "hadoop-conf"}}}}},
						Containers:         []corev1.Container{{Name: "ignored", Image: "ignored", Env: []corev1.EnvVar{{Name: "JAVA_HOME", Value: "/usr/lib/jvm"}}, VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/hadoop"}}}},
						NodeSelector:       map[string]string{"disk": "ssd", launch.NodeLabelPartition: "cpu"},
						Tolerations:        []corev1.Toleration{{Key: "yarn", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
						ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "registry"}},
						ServiceAccountName: "yarn-tasks",
						Affinity: &corev1.Affinity{
							NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 5, Preference: hostTerm("big")}}},
							PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
								{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, TopologyKey: "kubernetes.io/hostname"},
							}},
						},
						// Knit's, whatever the template says.
						RestartPolicy: corev1.RestartPolicyAlways,
						SchedulerName: "template-scheduler",
					},
				}
			},
			want: func(p *corev1.Pod) {
				p.Labels["team"] = "data"
				p.Annotations["koordinator.sh/qos"] = "BE"
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "hadoop-conf"}}}})
				p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "JAVA_HOME", Value: "/usr/lib/jvm"}}
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "knit", MountPath: "/knit"}, {Name: "conf", MountPath: "/etc/hadoop"}}
				p.Spec.NodeSelector = map[string]string{"disk": "ssd", "knit.io/node-label": "gpu"}
				p.Spec.Tolerations = []corev1.Toleration{{Key: "yarn", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
				p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
				p.Spec.ServiceAccountName = "yarn-tasks"
				p.Spec.Affinity = &corev1.Affinity{
					NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 5, Preference: hostTerm("big")}}},
					PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
						{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, TopologyKey: "kubernetes.io/hostname"},
						tagTerm("zk", "kubernetes.io/hostname", false, appIs(testApp)),
					}},
				}
			},
		},
		{
			name: "the template's grace period and token automount replace Knit's defaults",
			request: func(r *PodRequest) {
				r.Mapping.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](30), AutomountServiceAccountToken: ptr.To(true)}}
			},
			want: func(p *corev1.Pod) {
				p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
				p.Spec.AutomountServiceAccountToken = ptr.To(true)
			},
		},
		{
			name: "the template's required node terms are ANDed with each of Knit's",
			request: func(r *PodRequest) {
				r.Ask.ResourceName = proto.String("n1.example.com")
				r.Hosts, r.Strict, r.Blacklist = []string{"n1", "n2"}, true, []string{"b1"}
				r.Mapping.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: required(
						corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
						corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}},
					),
				}}}}
			},
			want: func(p *corev1.Pod) {
				poolIs := func(v string) []corev1.NodeSelectorRequirement {
					return []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{v}}}
				}
				p.Annotations[launch.AnnotationResourceName] = "n1.example.com"
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: required(
						corev1.NodeSelectorTerm{MatchExpressions: poolIs("a"), MatchFields: []corev1.NodeSelectorRequirement{nodeIs("n1"), nodeIsNot("b1")}},
						corev1.NodeSelectorTerm{MatchExpressions: poolIs("a"), MatchFields: []corev1.NodeSelectorRequirement{nodeIs("n2"), nodeIsNot("b1")}},
						corev1.NodeSelectorTerm{MatchExpressions: poolIs("b"), MatchFields: []corev1.NodeSelectorRequirement{nodeIs("n1"), nodeIsNot("b1")}},
						corev1.NodeSelectorTerm{MatchExpressions: poolIs("b"), MatchFields: []corev1.NodeSelectorRequirement{nodeIs("n2"), nodeIsNot("b1")}},
					),
				}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testRequest()
			tt.request(&r)
			want := testPod()
			tt.want(want)
			got, err := BuildPod(r)
			if err != nil {
				t.Fatalf("BuildPod: %v", err)
			}
			if !equality.Semantic.DeepEqual(want, got) {
				t.Errorf("BuildPod: pod differs (-want +got):\n%s", diff.Diff(want, got))
			}
		})
	}
}

func TestBuildPodErrors(t *testing.T) {
	gpu := func(value int64, units string) func(*PodRequest) {
		return func(r *PodRequest) {
			r.Ask.Capability = javaResource(1024, 1, resourceInfo("yarn.io/gpu", value, units))
		}
	}
	mapGPU := func(f func(*PodRequest)) func(*PodRequest) {
		return func(r *PodRequest) {
			f(r)
			r.Resources.Types = map[string]corev1.ResourceName{"yarn.io/gpu": "nvidia.com/gpu", "yarn.io/gpu2": "nvidia.com/gpu"}
		}
	}
	nodeLabel := func(expr string) func(*PodRequest) {
		return func(r *PodRequest) { r.Ask.NodeLabelExpression = proto.String(expr) }
	}
	constraint := func(c *yarnpb.PlacementConstraintProto) func(*PodRequest) {
		return func(r *PodRequest) { r.SchedulingRequest = constrained(c) }
	}
	tests := []struct {
		name    string
		request func(*PodRequest)
		want    string
	}{
		{"an unmapped resource type is named", gpu(1, ""), `resource type "yarn.io/gpu" is not mapped to a Kubernetes resource`},
		{"a resource type mapped onto cpu is refused", func(r *PodRequest) {
			gpu(1, "")(r)
			r.Resources.Types = map[string]corev1.ResourceName{"yarn.io/gpu": corev1.ResourceCPU}
		}, `resource type "yarn.io/gpu" maps to "cpu", which Knit sets from memory-mb and vcores`},
		{"two resource types mapped onto one resource are refused", mapGPU(func(r *PodRequest) {
			r.Ask.Capability = javaResource(1024, 1, resourceInfo("yarn.io/gpu", 1, ""), resourceInfo("yarn.io/gpu2", 1, ""))
		}), `resource type "yarn.io/gpu2" maps to "nvidia.com/gpu", as another type of the capability does`},
		{"a resource type given twice is refused", mapGPU(func(r *PodRequest) {
			r.Ask.Capability = javaResource(1024, 1, resourceInfo("yarn.io/gpu", 1, ""), resourceInfo("yarn.io/gpu", 1, ""))
		}), `resource "yarn.io/gpu" appears twice in the capability`},
		{"units Kubernetes does not know are refused", mapGPU(gpu(1, "p")), `resource "yarn.io/gpu": units "p" are not Kubernetes quantity units`},
		{"a negative amount is refused", mapGPU(gpu(-1, "")), `resource "yarn.io/gpu": negative amount -1`},
		{"negative memory is refused", func(r *PodRequest) { r.Ask.Capability.Memory = proto.Int64(-1) }, `resource "memory-mb": -1 MiB is out of range`},
		{"negative vcores are refused", func(r *PodRequest) { r.Ask.Capability.VirtualCores = proto.Int32(-1) }, `resource "vcores": negative amount -1`},
		{"negative millicores per vcore are refused", func(r *PodRequest) { r.Resources.MillicoresPerVcore = -1 }, "millicores per vcore -1 is negative"},
		{"an AND of labels is not one partition", nodeLabel("gpu && fast"), `node label expression "gpu && fast": Knit supports a single partition name`},
		{"an OR of labels is not one partition", nodeLabel("gpu||fast"), `node label expression "gpu||fast": Knit supports a single partition name`},
		{"a negated label is not one partition", nodeLabel("!gpu"), `node label expression "!gpu": Knit supports a single partition name`},
		{"a parenthesised label is not one partition", nodeLabel("(gpu)"), `node label expression "(gpu)": Knit supports a single partition name`},
		{"labels with spaces between are not one partition", nodeLabel("gpu fast"), `node label expression "gpu fast": Knit supports a single partition name`},
		{"a partition that is no label value is refused", nodeLabel("gpu/fast"), `node label expression "gpu/fast": not a Kubernetes label value`},
		{"an OR of constraints is refused", constraint(composite(yarnpb.CompositePlacementConstraintProto_OR, targetIn("node", tags(nil, "a")))),
			"placement constraint: OR of constraints: Kubernetes ANDs affinity terms and cannot express alternatives"},
		{"a delayed OR of constraints is refused", constraint(composite(yarnpb.CompositePlacementConstraintProto_DELAYED_OR)),
			"placement constraint: DELAYED_OR of constraints"},
		{"timed constraints are refused", constraint(&yarnpb.PlacementConstraintProto{CompositeConstraint: &yarnpb.CompositePlacementConstraintProto{
			CompositeType:         yarnpb.CompositePlacementConstraintProto_AND.Enum(),
			TimedChildConstraints: []*yarnpb.TimedPlacementConstraintProto{{PlacementConstraint: targetIn("node", tags(nil, "a")), SchedulingDelay: proto.Int64(1000)}},
		}}), "placement constraint: timed constraints: Kubernetes affinity has no time window"},
		{"a node attribute target is refused", constraint(targetIn("node", &yarnpb.PlacementConstraintTargetProto{
			TargetType: yarnpb.PlacementConstraintTargetProto_NODE_ATTRIBUTE.Enum(), TargetKey: proto.String("rm.yarn.io/java"), TargetValues: []string{"11"},
		})), `placement constraint: node attribute "rm.yarn.io/java": Knit supports node attributes only as a node partition`},
		{"a not-equal attribute op code is refused", constraint(&yarnpb.PlacementConstraintProto{SimpleConstraint: &yarnpb.SimplePlacementConstraintProto{
			Scope: proto.String("node"), MinCardinality: proto.Int32(1), AttributeOpCode: yarnpb.NodeAttributeOpCodeProto_NE.Enum(), TargetExpressions: []*yarnpb.PlacementConstraintTargetProto{nodePartitionTarget("gpu")},
		}}), "placement constraint: attribute op code NE"},
		{"a SELF target is refused", constraint(targetIn("node", &yarnpb.PlacementConstraintTargetProto{TargetType: yarnpb.PlacementConstraintTargetProto_SELF.Enum()})),
			"placement constraint: SELF target: Knit supports allocation tags and a node partition"},
		{"at most three per node is refused", constraint(simple("node", 0, 3, tags(nil, "a"))),
			"placement constraint: cardinality min 0 max 3 in scope node: Kubernetes expresses only affinity (min 1, no max) and anti-affinity (max 0)"},
		{"at least two per rack is refused", constraint(simple("rack", 2, math.MaxInt32, tags(nil, "a"))),
			"placement constraint: cardinality min 2 max unbounded in scope rack"},
		{"an unknown scope is refused", constraint(targetIn("cluster", tags(nil, "a"))), `placement constraint: scope "cluster": Knit supports "node" and "rack"`},
		{"a constraint without targets is refused", constraint(targetIn("node")), "placement constraint: no target expressions"},
		{"a tag target without tags is refused", constraint(targetIn("node", tags(nil))), "placement constraint: an allocation tag target with no tags"},
		{"affinity to any one of several tags is refused", constraint(targetIn("node", tags(nil, "a", "b"))),
			`placement constraint: affinity to any one of the allocation tags ["a" "b"]: Kubernetes ANDs affinity terms`},
		{"an unknown tag namespace is refused", constraint(targetIn("node", tags(proto.String("app-label/spark"), "a"))),
			`placement constraint: allocation tag namespace "app-label/spark": Knit supports self, not-self, all and app-id/<application id>`},
		{"a constrained tag that cannot be a label name is refused", constraint(targetNotIn("node", tags(nil, "no spaces"))),
			`placement constraint: allocation tag "no spaces" cannot be part of a Kubernetes label name`},
		{"anti-affinity to a node partition is refused", constraint(targetNotIn("node", nodePartitionTarget("gpu"))),
			`placement constraint: node partition ["gpu"]: Knit supports a node partition only as targetIn(node, NodePartition(name)) with one name`},
		{"affinity to any one of several partitions is refused", constraint(targetIn("node", nodePartitionTarget("gpu", "fpga"))),
			`placement constraint: node partition ["gpu" "fpga"]`},
		{"two partitions in one AND are refused", constraint(composite(yarnpb.CompositePlacementConstraintProto_AND,
			targetIn("node", nodePartitionTarget("gpu")), targetIn("node", nodePartitionTarget("fpga")))),
			`placement constraint: node partitions "gpu" and "fpga": a node is in one partition`},
		{"a partition expression in a constraint is refused", constraint(targetIn("node", nodePartitionTarget("gpu||fpga"))),
			`placement constraint: node label expression "gpu||fpga": Knit supports a single partition name`},
		{"a constraint partition that disagrees with the node label expression is refused", func(r *PodRequest) {
			r.Ask.NodeLabelExpression = proto.String("gpu")
			r.SchedulingRequest = constrained(targetIn("node", nodePartitionTarget("fpga")))
		}, `node label expression "gpu" and placement constraint partition "fpga" disagree`},
		{"an allocation tag that cannot be a label name is refused", func(r *PodRequest) { r.AllocationTags = []string{"-leading-dash"} },
			`allocation tag "-leading-dash" cannot be part of a Kubernetes label name`},
		{"a pod name that is no DNS subdomain is refused", func(r *PodRequest) { r.Name = "Container_1" }, `name "Container_1"`},
		{"a missing namespace is refused", func(r *PodRequest) { r.Mapping.Namespace = "" }, "no namespace in the queue's mapping"},
		{"a namespace that is no DNS label is refused", func(r *PodRequest) { r.Mapping.Namespace = "Yarn" }, `namespace "Yarn"`},
		{"a missing application id is refused", func(r *PodRequest) { r.App = "" }, "no application id"},
		{"an unknown role is refused", func(r *PodRequest) { r.Role = "executor" }, `role "executor" is neither "am" nor "task"`},
		{"a request without an ask is refused", func(r *PodRequest) { r.Ask = nil }, "neither a resource request nor a scheduling request"},
		{"a missing launcher image is refused", func(r *PodRequest) { r.Launcher.Image = "" }, "no launcher image"},
		{"a missing launcher init command is refused", func(r *PodRequest) { r.Launcher.InitCommand = nil }, "no launcher init command"},
		{"a missing launcher command is refused", func(r *PodRequest) { r.Launcher.Command = nil }, "no launcher command"},
		{"hosts and a rack together are refused", func(r *PodRequest) { r.Hosts, r.Rack = []string{"n1"}, "zone-a" },
			`both hosts ["n1"] and rack "zone-a": a resource name is one or the other`},
		{"strict locality that resolved to nothing is refused rather than run anywhere", func(r *PodRequest) {
			r.Ask.ResourceName = proto.String("gone.example.com")
			r.Strict = true
		}, `strict locality on "gone.example.com", which resolved to no node and no rack`},
		{"a template volume named like the launcher's is refused", func(r *PodRequest) {
			r.Mapping.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "knit"}}}}
		}, `the queue's pod template has a volume named "knit", which Knit keeps for itself`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testRequest()
			tt.request(&r)
			pod, err := BuildPod(r)
			if err == nil {
				t.Fatalf("BuildPod = %s, want an error containing %q", pod.Name, tt.want)
			}
			prefix := "rgs: pod " + r.Mapping.Namespace + "/" + r.Name + ": "
			if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, tt.want) {
				t.Errorf("BuildPod error %q, want %q then %q", msg, prefix, tt.want)
			}
		})
	}
}

// TestBuildPodGivesWhatTheAPIServerAccepts checks what Kubernetes
// validation would refuse in the pods of awkward requests: label and
// annotation keys and values, selector keys and values, names, one value
// per metadata.name requirement, and requests equal to limits.
func TestBuildPodGivesWhatTheAPIServerAccepts(t *testing.T) {
	tests := []struct {
		name    string
		request func(*PodRequest)
	}{
		{"a plain ask", func(*PodRequest) {}},
		{"awkward queue, user, numbers and ask hash", func(r *PodRequest) {
			r.Queue = "root." + strings.Repeat("very-long-queue-name.", 5)
			r.User = "jürgen@EXAMPLE.COM"
			r.Attempt = -1
			r.Ask.Priority.Priority = proto.Int32(math.MinInt32)
			r.Ask.AllocationRequestId = proto.Int64(math.MinInt64)
			r.AskHash = "-"
		}},
		{"every kind of placement", func(r *PodRequest) {
			r.Ask.ResourceName = proto.String("n1.example.com")
			r.Ask.NodeLabelExpression = proto.String("gpu")
			r.Ask.Capability = javaResource(1<<20, 64, resourceInfo("yarn.io/gpu", 8, ""))
			r.Resources.Types = map[string]corev1.ResourceName{"yarn.io/gpu": "nvidia.com/gpu"}
			r.Hosts, r.Strict, r.Blacklist = []string{"n1", "n2", "n3"}, true, []string{"b1", "b2"}
			r.AllocationTags = []string{"Spark_Executor.1"}
			r.SchedulingRequest = &yarnpb.SchedulingRequestProto{
				AllocationTags: []string{"zk"},
				PlacementConstraint: composite(yarnpb.CompositePlacementConstraintProto_AND,
					targetNotIn("node", tags(proto.String("not-self"), "zk", "hdfs")),
					targetIn("rack", tags(proto.String("app-id/application_1700000000000_0001"), "cache")),
					targetIn("node", nodePartitionTarget("gpu")),
				),
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testRequest()
			tt.request(&r)
			pod, err := BuildPod(r)
			if err != nil {
				t.Fatalf("BuildPod: %v", err)
			}
			for _, msg := range podProblems(pod) {
				t.Error(msg)
			}
		})
	}
}

// podProblems lists what of Kubernetes' validation pod fails, as far as
// apimachinery's validation functions tell.
func podProblems(pod *corev1.Pod) []string {
	var problems []string
	check := func(what, v string, msgs []string) {
		if len(msgs) > 0 {
			problems = append(problems, what+" "+strconv.Quote(v)+": "+strings.Join(msgs, "; "))
		}
	}
	labelMap := func(what string, m map[string]string) {
		for k, v := range m {
			check(what+" key", k, validation.IsQualifiedName(k))
			check(what+" value", v, validation.IsValidLabelValue(v))
		}
	}
	selector := func(s *metav1.LabelSelector) {
		labelMap("label selector", s.MatchLabels)
		for _, e := range s.MatchExpressions {
			check("label selector key", e.Key, validation.IsQualifiedName(e.Key))
			for _, v := range e.Values {
				check("label selector value", v, validation.IsValidLabelValue(v))
			}
		}
	}
	nodeTerm := func(term corev1.NodeSelectorTerm) {
		for _, e := range term.MatchExpressions {
			check("node selector key", e.Key, validation.IsQualifiedName(e.Key))
			for _, v := range e.Values {
				check("node selector value", v, validation.IsValidLabelValue(v))
			}
		}
		for _, f := range term.MatchFields {
			if f.Key != metav1.ObjectNameField || len(f.Values) != 1 {
				problems = append(problems, "node field selector "+f.Key+" with "+strconv.Quote(strings.Join(f.Values, ","))+": one metadata.name value allowed")
			}
		}
	}
	check("name", pod.Name, validation.IsDNS1123Subdomain(pod.Name))
	check("namespace", pod.Namespace, validation.IsDNS1123Label(pod.Namespace))
	labelMap("label", pod.Labels)
	for k := range pod.Annotations {
		check("annotation key", k, validation.IsQualifiedName(k))
	}
	labelMap("node selector", pod.Spec.NodeSelector)
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		check("container name", c.Name, validation.IsDNS1123Label(c.Name))
		if !equality.Semantic.DeepEqual(c.Resources.Requests, c.Resources.Limits) {
			problems = append(problems, "container "+c.Name+": requests differ from limits")
		}
	}
	for _, v := range pod.Spec.Volumes {
		check("volume name", v.Name, validation.IsDNS1123Label(v.Name))
	}
	if a := pod.Spec.Affinity; a != nil {
		if na := a.NodeAffinity; na != nil {
			if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
				for _, term := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
					nodeTerm(term)
				}
			}
			for _, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
				nodeTerm(p.Preference)
			}
		}
		var terms []corev1.PodAffinityTerm
		if a.PodAffinity != nil {
			terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		}
		if a.PodAntiAffinity != nil {
			terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		}
		for _, term := range terms {
			selector(term.LabelSelector)
			check("topology key", term.TopologyKey, validation.IsQualifiedName(term.TopologyKey))
		}
	}
	return problems
}

func TestBuildPodSharesNothingWithTheRequest(t *testing.T) {
	r := testRequest()
	r.Hosts, r.Blacklist = []string{"n1"}, []string{"b1"}
	r.Owner = &metav1.OwnerReference{Name: "owner", Controller: ptr.To(true)}
	r.Mapping.Template = &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "data"}, Annotations: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"disk": "ssd"},
			Volumes:      []corev1.Volume{{Name: "conf"}},
			Containers:   []corev1.Container{{Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: required(hostTerm("t1")),
			}},
		},
	}
	templateBefore := r.Mapping.Template.DeepCopy()
	first, err := BuildPod(r)
	if err != nil {
		t.Fatalf("BuildPod: %v", err)
	}
	again, err := BuildPod(r)
	if err != nil {
		t.Fatalf("BuildPod again: %v", err)
	}
	if !equality.Semantic.DeepEqual(first, again) {
		t.Fatalf("BuildPod is not deterministic:\n%s", diff.Diff(first, again))
	}

	first.Labels["team"] = "changed"
	first.Annotations["a"] = "changed"
	first.Spec.NodeSelector["disk"] = "changed"
	first.Spec.Volumes[1].Name = "changed"
	first.Spec.Containers[0].Env[0].Value = "changed"
	first.Spec.Containers[0].Command[0] = "changed"
	first.Spec.InitContainers[0].Command[0] = "changed"
	first.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] = "changed"
	*first.OwnerReferences[0].Controller = false
	first.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("99")

	if !equality.Semantic.DeepEqual(templateBefore, r.Mapping.Template) {
		t.Errorf("changing the pod changed the template:\n%s", diff.Diff(templateBefore, r.Mapping.Template))
	}
	if r.Launcher.Command[0] != "/knit/bin/knit-launcher" || r.Launcher.InitCommand[0] != "cp" {
		t.Errorf("changing the pod changed the launcher: %q, %q", r.Launcher.Command, r.Launcher.InitCommand)
	}
	if !*r.Owner.Controller {
		t.Error("changing the pod changed the owner reference")
	}
	if got := first.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; got.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("changing the requests changed the limits to %s", got.String())
	}
	if got := first.Spec.InitContainers[0].Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("100m")) != 0 {
		t.Errorf("changing the main container changed the init container to %s", got.String())
	}
}

func TestLabelValueIsAlwaysAValidLabelValue(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"RUNNING", "RUNNING"},
		{"root.default", "root.default"},
		{"hdfs/nn1.example.com@EXAMPLE.COM", "hdfs_nn1.example.com_EXAMPLE.COM"},
		{"a b", "a_b"},
		{"application_1700000000000_0007", "application_1700000000000_0007"},
		{"alice@EXAMPLE.COM", "alice_EXAMPLE.COM"},
		{"root.data science", "root.data_science"},
		{"jürgen", "j__rgen"},
		{"-leading.and.trailing-", "leading.and.trailing"},
		{"@@@", ""},
		{strings.Repeat("q", 70), strings.Repeat("q", 63)},
		// Cut to 63 first, then trimmed: the cut must not leave a '.' last.
		{strings.Repeat("q", 62) + ".x", strings.Repeat("q", 62)},
	}
	for _, tt := range tests {
		got := launch.LabelValue(tt.in)
		if got != tt.want {
			t.Errorf("launch.LabelValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if msgs := validation.IsValidLabelValue(got); len(msgs) > 0 {
			t.Errorf("launch.LabelValue(%q) = %q, not a label value: %v", tt.in, got, msgs)
		}
	}
}

func TestIntLabelValueWritesNegativesWithNegAndReadsBack(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0"},
		{7, "7"},
		{-1, "neg1"},
		{math.MaxInt64, "9223372036854775807"},
		{math.MinInt64, "neg9223372036854775808"},
	}
	for _, tt := range tests {
		got := launch.IntLabelValue(tt.in)
		if got != tt.want {
			t.Errorf("launch.IntLabelValue(%d) = %q, want %q", tt.in, got, tt.want)
		}
		if msgs := validation.IsValidLabelValue(got); len(msgs) > 0 {
			t.Errorf("launch.IntLabelValue(%d) = %q, not a label value: %v", tt.in, got, msgs)
		}
		if back := launch.ParseIntLabelValue(got); back != tt.in {
			t.Errorf("launch.ParseIntLabelValue(%q) = %d, want %d", got, back, tt.in)
		}
	}
}
