package rgs

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Label keys on every Knit pod. They let the RM's informers, kubectl users
// and the RGS controller find a container's pod without reading its spec.
//
// String values (application, queue, user, ask) go through LabelValue: a
// value Kubernetes would refuse is sanitised, and the exact original is kept
// in an annotation under the same key. Number values (attempt, priority,
// allocation request id) go through IntLabelValue.
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
	// LabelContainer holds the container id string. BuildPod never sets it:
	// the controller adds it once the pod is bound and the id is assigned.
	LabelContainer = "knit.io/container"
	// LabelQueue holds the queue path ("root.default").
	LabelQueue = "knit.io/queue"
	// LabelUser holds the submitting user.
	LabelUser = "knit.io/user"
	// LabelAsk holds the ask key hash (AskKey.Hash()), so that the pending
	// pods of one key can be counted with a selector.
	LabelAsk = "knit.io/ask"
)

// Roles, the values of LabelRole.
const (
	// RoleAM marks the pod of an application master container.
	RoleAM = "am"
	// RoleTask marks the pod of any other container.
	RoleTask = "task"
)

// Annotations on every Knit pod: facts of the ask that a selector never
// needs, or that no label value could hold.
const (
	// AnnotationResourceName holds the ask's resource name: a host, a rack
	// ("/zone") or "*".
	AnnotationResourceName = "knit.io/resource-name"
	// AnnotationExecutionType holds the ask's execution type, GUARANTEED or
	// OPPORTUNISTIC. OPPORTUNISTIC pods get no special treatment yet: they
	// are scheduled exactly like GUARANTEED ones.
	AnnotationExecutionType = "knit.io/execution-type"
	// AnnotationStoppedBy marks a pod whose container the AM stopped
	// (stopContainers), so its end reads as KILLED_BY_APPMASTER.
	AnnotationStoppedBy = "knit.io/stopped-by"
)

// NodeLabelPartition is the node label that places a node in a YARN node
// partition (node label); an ask with node label expression "gpu" gets the
// node selector NodeLabelPartition: "gpu".
const NodeLabelPartition = "knit.io/node-label"

// TagLabelPrefix prefixes the label that marks a pod with a YARN allocation
// tag: tag "hbase-m" is the label "tags.knit.io/hbase-m": "true". Placement
// constraints on tags become pod (anti-)affinity on these labels.
const TagLabelPrefix = "tags.knit.io/"

// LabelValue turns s into a valid label value: characters a label value may
// not hold become '_', the result is cut to 63 characters, and anything but
// letters and digits is trimmed from both ends. The RM's store labels
// YarnApplication objects with it too, so one selector finds both an
// application and its pods. Different values can map to the same label
// value (alice@A and alice@B both become alice_A...), so a selector on a
// sanitised label is a hint to check against the annotation, never a key.
func LabelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !isLabelAlnum(c) && c != '-' && c != '_' && c != '.' {
			b[i] = '_'
		}
	}
	if len(b) > validation.LabelValueMaxLength {
		b = b[:validation.LabelValueMaxLength]
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

// parseIntLabelValue reads back what IntLabelValue wrote; anything else is 0.
func parseIntLabelValue(v string) int64 {
	if rest, ok := strings.CutPrefix(v, "neg"); ok {
		v = "-" + rest
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

func isLabelAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
