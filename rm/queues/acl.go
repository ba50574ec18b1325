package queues

import (
	"strconv"
	"strings"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// QueueACL names a queue operation a user may be allowed, numbered as
// Hadoop's QueueACLProto.
type QueueACL int

// The queue ACLs, in Hadoop's order (QueueACL.values()).
const (
	// SubmitApplications allows submitting applications to the queue.
	SubmitApplications QueueACL = 1
	// AdministerQueue allows killing others' applications, changing their
	// priority and the like; it also allows submitting.
	AdministerQueue QueueACL = 2
)

// String returns Hadoop's name, as in "acl_submit_applications".
func (a QueueACL) String() string {
	switch a {
	case SubmitApplications:
		return "SUBMIT_APPLICATIONS"
	case AdministerQueue:
		return "ADMINISTER_QUEUE"
	}
	return "QueueACL(" + strconv.Itoa(int(a)) + ")"
}

// Proto returns the wire enum.
func (a QueueACL) Proto() yarnpb.QueueACLProto { return yarnpb.QueueACLProto(a) }

// key is the property suffix, e.g. "acl_submit_applications".
func (a QueueACL) key() string { return "acl_" + strings.ToLower(a.String()) }

// queueACLs lists every QueueACL in Hadoop's order.
func queueACLs() [2]QueueACL { return [2]QueueACL{SubmitApplications, AdministerQueue} }
