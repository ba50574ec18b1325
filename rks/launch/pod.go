package launch

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// The pod contract: what the RM, RGS, RKS, knit-node and knit-launcher agree
// on about a container's pod, declared here once.
//
// Label keys on every Knit pod. They let the RM's informers, kubectl users,
// the RGS controller and knit-node find a container's pod without reading
// its spec. String values (application, queue, user, ask) go through
// LabelValue: a value Kubernetes would refuse is sanitised, and the exact
// original is kept in an annotation under the same key. Number values
// (attempt, priority, allocation request id) go through IntLabelValue.
const (
	// LabelApplication holds the application id string.
	LabelApplication = "knit.io/application"
	// LabelAttempt holds the attempt number in decimal ("1").
	LabelAttempt = "knit.io/attempt"
	// LabelRole holds RoleAM or RoleTask.
	LabelRole = "knit.io/role"
	// LabelPriority holds the ask's priority (IntLabelValue).
	LabelPriority = "knit.io/priority"
	// LabelAllocationRequestID holds the ask's allocation request id
	// (IntLabelValue); asks from clients that never set one carry -1, so
	// this is usually "neg1".
	LabelAllocationRequestID = "knit.io/allocation-request-id"
	// LabelContainer holds the container id string. RGS adds it once the
	// pod is bound and the id is assigned.
	LabelContainer = "knit.io/container"
	// LabelQueue holds the queue path ("root.default"); the RM's
	// YarnApplication objects carry it too.
	LabelQueue = "knit.io/queue"
	// LabelUser holds the submitting user; the RM's YarnApplication
	// objects carry it too.
	LabelUser = "knit.io/user"
	// LabelAsk holds the ask key hash, so that the pending pods of one key
	// can be counted with a selector.
	LabelAsk = "knit.io/ask"
	// LabelState holds a YarnApplication's state (FINISHED, KILLED, ...):
	// knit-node ends an application on its node when it reads a final one.
	LabelState = "knit.io/state"
	// LabelSecret marks the Secret RKS writes for a started container.
	LabelSecret = "knit.io/secret"
	// LabelSubCluster holds the federation sub-cluster (its
	// yarn.resourcemanager.cluster-id) whose RM made the pod, on the pods
	// of an RM in a federation: sub-clusters sharing one Kubernetes
	// cluster run the same application ids (an AM's home and its
	// unmanaged AMs), and each RM must see only its own pods.
	LabelSubCluster = "knit.io/sub-cluster"
)

// Roles, the values of LabelRole.
const (
	// RoleAM marks the pod of an application master container.
	RoleAM = "am"
	// RoleTask marks the pod of any other container.
	RoleTask = "task"
)

// Annotations on Knit pods: facts of the ask that a selector never needs,
// or that no label value could hold, and the state of a container's updates.
const (
	// AnnotationResourceName holds the ask's resource name: a host, a rack
	// ("/zone") or "*".
	AnnotationResourceName = "knit.io/resource-name"
	// AnnotationExecutionType holds the ask's execution type, GUARANTEED or
	// OPPORTUNISTIC.
	AnnotationExecutionType = "knit.io/execution-type"
	// AnnotationStoppedBy marks a pod whose container the AM stopped
	// (stopContainers), so its end reads as KILLED_BY_APPMASTER.
	AnnotationStoppedBy = "knit.io/stopped-by"
	// StoppedByAppMaster is AnnotationStoppedBy's value.
	StoppedByAppMaster = "appmaster"
	// AnnotationVersion holds the container's version: 0 when allocated,
	// one more at each update the RM grants.
	AnnotationVersion = "knit.io/container-version"
	// AnnotationNodeVersion holds the version the NodeManager side holds.
	AnnotationNodeVersion = "knit.io/node-container-version"
	// AnnotationIncreaseFrom marks a pod whose resize for an increase the
	// node has not accepted yet, holding the requests to go back to (JSON).
	AnnotationIncreaseFrom = "knit.io/increase-from"
)

// NodeLabelPartition is the node label that places a node in a YARN node
// partition (node label).
const NodeLabelPartition = "knit.io/node-label"

// TagLabelPrefix prefixes the label that marks a pod with a YARN allocation
// tag: tag "hbase-m" is the label "tags.knit.io/hbase-m": "true".
const TagLabelPrefix = "tags.knit.io/"

// ContainerName is the main container of every Knit pod: knit-launcher,
// then the YARN launch command it runs.
const ContainerName = "container"

// labelValueMaxLength is Kubernetes' limit on a label value
// (validation.LabelValueMaxLength), repeated so knit-launcher stays free of
// apimachinery.
const labelValueMaxLength = 63

// LabelValue turns s into a valid label value: characters a label value may
// not hold become '_', the result is cut to 63 characters, and anything but
// letters and digits is trimmed from both ends. Different values can map to
// the same label value (alice@A and alice@B both become alice_A...), so a
// selector on a sanitised label is a hint to check against the annotation,
// never a key.
func LabelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !isLabelAlnum(c) && c != '-' && c != '_' && c != '.' {
			b[i] = '_'
		}
	}
	if len(b) > labelValueMaxLength {
		b = b[:labelValueMaxLength]
	}
	start, end := 0, len(b)
	for start < end && !isLabelAlnum(b[start]) {
		start++
	}
	for end > start && !isLabelAlnum(b[end-1]) {
		end--
	}
	return string(b[start:end])
}

// IntLabelValue writes n in decimal as a label value. A label value may not
// begin with '-', and dropping the sign would make -1 and 1 the same label,
// so a negative number is written with "neg" in place of its sign: -1 is
// "neg1".
func IntLabelValue(n int64) string {
	s := strconv.FormatInt(n, 10)
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		return "neg" + rest
	}
	return s
}

// ParseIntLabelValue reads back what IntLabelValue wrote; anything else is 0.
func ParseIntLabelValue(v string) int64 {
	if rest, ok := strings.CutPrefix(v, "neg"); ok {
		v = "-" + rest
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

func isLabelAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// The aux-service contract between knit-node and RKS. knit-node publishes
// the services that really run on its node, and their metadata, on its Node
// object; startContainers answers with exactly those. Service data from the
// AM travels in the container's Secret, never in an annotation (MapReduce
// puts its job token there).
const (
	// AnnotationAuxServices, on a Node, holds the JSON object of the aux
	// services knit-node runs there: name → metadata (base64 in JSON).
	AnnotationAuxServices = "knit.io/aux-services"
	// SecretKeyServiceDataPrefix prefixes the key of each service_data
	// entry in a container's Secret: "service-data.mapreduce_shuffle".
	SecretKeyServiceDataPrefix = "service-data."
	// ShuffleService is MapReduce's shuffle (ShuffleHandler's name).
	ShuffleService = "mapreduce_shuffle"
	// SparkShuffleService is Spark's external shuffle service.
	SparkShuffleService = "spark_shuffle"
)

// PortMetadata is the metadata of a service that publishes its port, as
// ShuffleHandler does: the port as a 4-byte big-endian int.
func PortMetadata(port int) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(port))
}

// MaxAuxServicesBytes bounds the aux-service annotation a node publishes.
const MaxAuxServicesBytes = 16 << 10

// EncodeAuxServices is the AnnotationAuxServices value of a node's services.
func EncodeAuxServices(services map[string][]byte) (string, error) {
	b, err := json.Marshal(services)
	if err != nil {
		return "", fmt.Errorf("launch: encode aux services: %w", err)
	}
	if len(b) > MaxAuxServicesBytes {
		return "", fmt.Errorf("launch: aux services of %d bytes are over the limit of %d", len(b), MaxAuxServicesBytes)
	}
	return string(b), nil
}

// The log-aggregation contract between knit-node and the RM: knit-node
// publishes, on its Node, how the aggregation of each application that
// ended there lately went; the RM's application reports combine the nodes
// an application ran on (YARN's LogAggregationStatus).
const (
	// AnnotationLogAggregation, on a Node, holds the JSON object
	// application id → LogAggregationStatus name (RUNNING, SUCCEEDED,
	// FAILED) of the node's recent applications.
	AnnotationLogAggregation = "knit.io/log-aggregation"
	// MaxLogAggregationApps bounds the applications one node publishes:
	// the oldest go first.
	MaxLogAggregationApps = 256
	// MaxLogAggregationBytes bounds the annotation.
	MaxLogAggregationBytes = 32 << 10
)

// EncodeLogAggregation is the AnnotationLogAggregation value of statuses.
func EncodeLogAggregation(statuses map[string]string) (string, error) {
	b, err := json.Marshal(statuses)
	if err != nil {
		return "", fmt.Errorf("launch: encode log aggregation: %w", err)
	}
	if len(b) > MaxLogAggregationBytes {
		return "", fmt.Errorf("launch: log aggregation statuses of %d bytes are over the limit of %d", len(b), MaxLogAggregationBytes)
	}
	return string(b), nil
}

// DecodeLogAggregation reads an AnnotationLogAggregation value.
func DecodeLogAggregation(s string) (map[string]string, error) {
	if len(s) > MaxLogAggregationBytes {
		return nil, fmt.Errorf("launch: log aggregation statuses of %d bytes are over the limit of %d", len(s), MaxLogAggregationBytes)
	}
	statuses := map[string]string{}
	if err := json.Unmarshal([]byte(s), &statuses); err != nil {
		return nil, fmt.Errorf("launch: decode log aggregation: %w", err)
	}
	return statuses, nil
}

// DecodeAuxServices reads an AnnotationAuxServices value.
func DecodeAuxServices(s string) (map[string][]byte, error) {
	if len(s) > MaxAuxServicesBytes {
		return nil, fmt.Errorf("launch: aux services of %d bytes are over the limit of %d", len(s), MaxAuxServicesBytes)
	}
	services := map[string][]byte{}
	if err := json.Unmarshal([]byte(s), &services); err != nil {
		return nil, fmt.Errorf("launch: decode aux services: %w", err)
	}
	return services, nil
}

// The RM's record of each application, a YarnApplication object (CRD
// yarnapplications.knit.io): the RM writes it, knit-node watches it to learn
// that an application ended, as a NodeManager learns it from the RM's
// heartbeat answer.
const (
	ApplicationGroup    = "knit.io"
	ApplicationVersion  = "v1alpha1"
	ApplicationKind     = "YarnApplication"
	ApplicationResource = "yarnapplications"
)

// IsFinalState reports whether a LabelState value is that of an
// application that has ended (RMAppState FINISHED, FAILED, KILLED).
func IsFinalState(state string) bool {
	switch state {
	case "FINISHED", "FAILED", "KILLED":
		return true
	}
	return false
}

// ApplicationObjectName is the name of the YarnApplication that holds an
// application: its id in lower case with '_' turned into '-'
// (application_1_0001 is application-1-0001).
func ApplicationObjectName(id string) string {
	return strings.ReplaceAll(strings.ToLower(id), "_", "-")
}

// ServiceDataSecretKey is the key of service's service_data in a
// container's Secret.
func ServiceDataSecretKey(service string) string { return SecretKeyServiceDataPrefix + service }

// AnnotationLogAggregationContext, on an application's pods, holds the
// LogAggregationContext it was submitted with (JSON of
// LogAggregationContext): which of its containers' log files knit-node
// aggregates, when the application ends and on the rolling interval, as
// the NodeManager reads it from the container token.
const AnnotationLogAggregationContext = "knit.io/log-aggregation-context"

// MaxLogAggregationContextBytes bounds the annotation: four patterns and a
// policy are small.
const MaxLogAggregationContextBytes = 16 << 10

// LogAggregationContext is YARN's LogAggregationContext. An empty pattern
// is one the application did not set: LogAggregationContextPBImpl answers
// null for it, and the NodeManager then filters nothing by it (the
// proto's declared defaults are never read).
type LogAggregationContext struct {
	IncludePattern           string `json:"includePattern,omitempty"`
	ExcludePattern           string `json:"excludePattern,omitempty"`
	RolledLogsIncludePattern string `json:"rolledLogsIncludePattern,omitempty"`
	RolledLogsExcludePattern string `json:"rolledLogsExcludePattern,omitempty"`
	PolicyClassName          string `json:"policyClassName,omitempty"`
	PolicyParameters         string `json:"policyParameters,omitempty"`
}

// LogAggregationContextOf reads a submission's context; ok is false for
// none.
func LogAggregationContextOf(p *yarnpb.LogAggregationContextProto) (c LogAggregationContext, ok bool) {
	if p == nil {
		return c, false
	}
	// Each field as the application set it: the getters would answer the
	// proto's declared defaults instead of "not set".
	val := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	return LogAggregationContext{
		IncludePattern:           val(p.IncludePattern),
		ExcludePattern:           val(p.ExcludePattern),
		RolledLogsIncludePattern: val(p.RolledLogsIncludePattern),
		RolledLogsExcludePattern: val(p.RolledLogsExcludePattern),
		PolicyClassName:          val(p.LogAggregationPolicyClassName),
		PolicyParameters:         val(p.LogAggregationPolicyParameters),
	}, true
}

// Proto is the context as a container token carries it, with only the
// fields the application set.
func (c LogAggregationContext) Proto() *yarnpb.LogAggregationContextProto {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return &yarnpb.LogAggregationContextProto{
		IncludePattern:                 opt(c.IncludePattern),
		ExcludePattern:                 opt(c.ExcludePattern),
		RolledLogsIncludePattern:       opt(c.RolledLogsIncludePattern),
		RolledLogsExcludePattern:       opt(c.RolledLogsExcludePattern),
		LogAggregationPolicyClassName:  opt(c.PolicyClassName),
		LogAggregationPolicyParameters: opt(c.PolicyParameters),
	}
}

// EncodeLogAggregationContext is the AnnotationLogAggregationContext value
// of c.
func EncodeLogAggregationContext(c LogAggregationContext) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("launch: encode log aggregation context: %w", err)
	}
	if len(b) > MaxLogAggregationContextBytes {
		return "", fmt.Errorf("launch: log aggregation context of %d bytes is over the limit of %d", len(b), MaxLogAggregationContextBytes)
	}
	return string(b), nil
}

// DecodeLogAggregationContext reads an AnnotationLogAggregationContext
// value.
func DecodeLogAggregationContext(s string) (LogAggregationContext, error) {
	var c LogAggregationContext
	if len(s) > MaxLogAggregationContextBytes {
		return c, fmt.Errorf("launch: log aggregation context of %d bytes is over the limit of %d", len(s), MaxLogAggregationContextBytes)
	}
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return LogAggregationContext{}, fmt.Errorf("launch: decode log aggregation context: %w", err)
	}
	return c, nil
}

// The utilization contract between knit-node and the RM: knit-node
// measures its node and the containers on it, as a NodeManager's
// NodeResourceMonitor and ContainersMonitor do, and publishes the figures
// on its Node, with the machine's physical memory and processors; the RM's
// node reports carry the figures (NodeReport's node_utilization and
// containers_utilization), and its REST nodes' memUtilization and
// cpuUtilization are the node's figures as shares of the machine.
const (
	// AnnotationUtilization, on a Node, holds the JSON of NodeUtilization.
	AnnotationUtilization = "knit.io/utilization"
	// MaxUtilizationBytes bounds the annotation: eight numbers are small.
	MaxUtilizationBytes = 1 << 10
)

// ResourceUtilization is YARN's ResourceUtilization: physical and virtual
// memory in MiB and CPU in vcores (a fraction: 0.25 is a quarter of one).
type ResourceUtilization struct {
	PmemMB int32   `json:"pmemMB"`
	VmemMB int32   `json:"vmemMB"`
	CPU    float32 `json:"cpu"`
}

// Proto is u as a NodeReport carries it.
func (u ResourceUtilization) Proto() *yarnpb.ResourceUtilizationProto {
	return &yarnpb.ResourceUtilizationProto{Pmem: &u.PmemMB, Vmem: &u.VmemMB, Cpu: &u.CPU}
}

// PhysicalResource is the machine a node runs on: what a NodeManager sends
// once, in RegisterNodeManagerRequest's physicalResource, from
// SysInfoLinux's getPhysicalMemorySize (MemTotal less corrupted RAM and
// reserved huge pages) in MiB and getNumProcessors.
type PhysicalResource struct {
	MemoryMB int64 `json:"memoryMB"`
	Vcores   int32 `json:"vcores"`
}

// NodeUtilization is what a node publishes: the whole node's use
// (NodeResourceMonitor's), the sum of its containers' (ContainersMonitor's)
// and the machine they are measured on. Physical is zero, and left out of
// the JSON, when unknown: a knit-node from before it was published sends
// none.
type NodeUtilization struct {
	Node       ResourceUtilization `json:"node"`
	Containers ResourceUtilization `json:"containers"`
	Physical   PhysicalResource    `json:"physical,omitzero"`
}

// EncodeUtilization is the AnnotationUtilization value of u.
func EncodeUtilization(u NodeUtilization) (string, error) {
	if err := u.check(); err != nil {
		return "", err
	}
	b, err := json.Marshal(u)
	if err != nil {
		return "", fmt.Errorf("launch: encode utilization: %w", err)
	}
	if len(b) > MaxUtilizationBytes {
		return "", fmt.Errorf("launch: utilization of %d bytes is over the limit of %d", len(b), MaxUtilizationBytes)
	}
	return string(b), nil
}

// DecodeUtilization reads an AnnotationUtilization value.
func DecodeUtilization(s string) (NodeUtilization, error) {
	var u NodeUtilization
	if len(s) > MaxUtilizationBytes {
		return u, fmt.Errorf("launch: utilization of %d bytes is over the limit of %d", len(s), MaxUtilizationBytes)
	}
	if err := json.Unmarshal([]byte(s), &u); err != nil {
		return NodeUtilization{}, fmt.Errorf("launch: decode utilization: %w", err)
	}
	if err := u.check(); err != nil {
		return NodeUtilization{}, err
	}
	return u, nil
}

// check refuses what no measurement gives: a negative figure. JSON holds
// no NaN or infinity, and json.Marshal refuses them.
func (u NodeUtilization) check() error {
	for _, r := range []ResourceUtilization{u.Node, u.Containers} {
		if r.PmemMB < 0 || r.VmemMB < 0 || r.CPU < 0 || math.IsNaN(float64(r.CPU)) {
			return fmt.Errorf("launch: utilization %+v holds a negative or undefined figure", u)
		}
	}
	if u.Physical.MemoryMB < 0 || u.Physical.Vcores < 0 {
		return fmt.Errorf("launch: utilization %+v holds a negative physical resource", u)
	}
	return nil
}

// SchedulingGate holds a Knit pod back from the Kubernetes scheduler until
// Knit admits it to its queue's share (rgs/admission); a pod of a queue
// whose admission is delegated to a batch scheduler has none.
const SchedulingGate = "knit.io/admission"
