package tokens

import (
	"fmt"
	"net"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// The id strings below are the toString forms Hadoop puts in token users and
// error messages (facts §4.4): clients compare the user of an AMRM or NM
// token with the attempt id string, so they must match Java's exactly.

// AttemptString formats an attempt id as ApplicationAttemptId.toString does:
// appattempt_<cluster timestamp>_<app id, 4 digits>_<attempt id, 6 digits>.
func AttemptString(a *yarnpb.ApplicationAttemptIdProto) string {
	app := a.GetApplicationId()
	return fmt.Sprintf("appattempt_%d_%04d_%06d", app.GetClusterTimestamp(), app.GetId(), a.GetAttemptId())
}

// containerIDBits is the width of the per-attempt sequence in
// ContainerIdProto.id; the RM epoch sits above it.
const containerIDBits = 40

// containerString formats a container id as ContainerId.toString does, with
// the e<epoch>_ part only when the epoch is not zero.
func containerString(c *yarnpb.ContainerIdProto) string {
	att := c.GetAppAttemptId()
	app := att.GetApplicationId()
	id := c.GetId()
	epoch := ""
	if e := id >> containerIDBits; e > 0 {
		epoch = fmt.Sprintf("e%02d_", e)
	}
	return fmt.Sprintf("container_%s%d_%04d_%02d_%06d", epoch, app.GetClusterTimestamp(), app.GetId(),
		att.GetAttemptId(), id&(1<<containerIDBits-1))
}

// defaultTokenService is host:port without resolving the host; Hadoop's
// SecurityUtil.buildTokenService puts the resolved IP there, which the RM
// supplies through Config.TokenService when its node hosts are names.
func defaultTokenService(host string, port int32) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// attemptKey identifies an attempt in maps.
type attemptKey struct {
	clusterTimestamp int64
	app              int32
	attempt          int32
}

func keyOfAttempt(a *yarnpb.ApplicationAttemptIdProto) attemptKey {
	return attemptKey{
		clusterTimestamp: a.GetApplicationId().GetClusterTimestamp(),
		app:              a.GetApplicationId().GetId(),
		attempt:          a.GetAttemptId(),
	}
}

func (k attemptKey) proto() *yarnpb.ApplicationAttemptIdProto {
	return &yarnpb.ApplicationAttemptIdProto{
		ApplicationId: &yarnpb.ApplicationIdProto{Id: proto.Int32(k.app), ClusterTimestamp: proto.Int64(k.clusterTimestamp)},
		AttemptId:     proto.Int32(k.attempt),
	}
}

// nodeKey identifies a node in maps.
type nodeKey struct {
	host string
	port int32
}

func keyOfNode(n *yarnpb.NodeIdProto) nodeKey {
	return nodeKey{host: n.GetHost(), port: n.GetPort()}
}

// attemptProto copies an attempt id into the form Java's
// ApplicationAttemptIdPBImpl writes: application_id {id, cluster_timestamp},
// attemptId, every field set. Copying keeps a caller's proto out of the
// identifier, and drops anything the RM would not have written.
func attemptProto(a *yarnpb.ApplicationAttemptIdProto) *yarnpb.ApplicationAttemptIdProto {
	return keyOfAttempt(a).proto()
}
