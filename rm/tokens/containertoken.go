package tokens

import (
	"crypto/hmac"
	"errors"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// KindContainer is the kind of ContainerTokens (ContainerTokenIdentifier.KIND).
const KindContainer = "ContainerToken"

// ContainerTokens is the ContainerToken secret manager: the RM side
// (RMContainerTokenSecretManager) signs a token for each allocated
// container, and the NodeManager side (NMContainerTokenSecretManager plus
// ContainerManagerImpl's checks), which RKS plays, checks the token that
// comes with startContainers.
type ContainerTokens struct{ m *Manager }

// ContainerTokens returns the ContainerToken secret manager.
func (m *Manager) ContainerTokens() ContainerTokens { return ContainerTokens{m} }

// ContainerTokenSpec is what a container token says about its container: the
// arguments of RMContainerTokenSecretManager.createContainerToken.
type ContainerTokenSpec struct {
	// ContainerID and NodeID are required.
	ContainerID *yarnpb.ContainerIdProto
	NodeID      *yarnpb.NodeIdProto
	// AppSubmitter is the application's user; the container runs as it.
	AppSubmitter string
	// Resource and Priority are copied in if not nil.
	Resource *yarnpb.ResourceProto
	Priority *yarnpb.PriorityProto
	// CreationTime is when the RM created the container; zero means now.
	CreationTime time.Time
	// LogAggregationContext is copied in if not nil.
	LogAggregationContext *yarnpb.LogAggregationContextProto
	// NodeLabelExpression is always written, "" meaning no label, as the RM
	// passes the container's expression or CommonNodeLabelsManager.NO_LABEL.
	NodeLabelExpression string
	// ContainerType zero means TASK; ExecutionType zero means GUARANTEED.
	ContainerType yarnpb.ContainerTypeProto
	ExecutionType yarnpb.ExecutionTypeProto
	// Version is the container's update version, 0 until updateContainers.
	Version int32
	// AllocationRequestID is the ask's id; the AM matches containers by it.
	AllocationRequestID int64
	// AllocationTags are written if any.
	AllocationTags []string
}

// Create signs a container token under the current key. It expires
// Config.ContainerTokenLifetime from now; its service is
// Config.TokenService(node). It also returns the identifier it wrote.
func (c ContainerTokens) Create(spec ContainerTokenSpec) (token.Token, *yarnpb.ContainerTokenIdentifierProto, error) {
	if spec.ContainerID.GetAppAttemptId().GetApplicationId() == nil || spec.NodeID == nil {
		return token.Token{}, nil, errors.New("tokens: container token needs a container id and a node id")
	}
	now := c.m.cfg.Clock.Now()
	created := spec.CreationTime
	if created.IsZero() {
		created = now
	}
	containerType := spec.ContainerType
	if containerType == 0 {
		containerType = yarnpb.ContainerTypeProto_TASK
	}
	executionType := spec.ExecutionType
	if executionType == 0 {
		executionType = yarnpb.ExecutionTypeProto_GUARANTEED
	}
	key := c.m.snap.Load().keys.ContainerToken.Current
	// Set exactly the fields Java's ContainerTokenIdentifier constructor
	// sets: the optional records only when given, everything else always.
	id := &yarnpb.ContainerTokenIdentifierProto{
		ContainerId: &yarnpb.ContainerIdProto{
			AppAttemptId: attemptProto(spec.ContainerID.GetAppAttemptId()),
			Id:           proto.Int64(spec.ContainerID.GetId()),
		},
		NmHostAddr:          proto.String(yarnid.NodeString(spec.NodeID)),
		AppSubmitter:        proto.String(spec.AppSubmitter),
		ExpiryTimeStamp:     proto.Int64(now.Add(c.m.cfg.ContainerTokenLifetime).UnixMilli()),
		MasterKeyId:         proto.Int32(key.ID),
		RmIdentifier:        proto.Int64(c.m.rmIdentifier.Load()),
		CreationTime:        proto.Int64(created.UnixMilli()),
		NodeLabelExpression: proto.String(spec.NodeLabelExpression),
		ContainerType:       containerType.Enum(),
		ExecutionType:       executionType.Enum(),
		Version:             proto.Int32(spec.Version),
		AllocationRequestId: proto.Int64(spec.AllocationRequestID),
		AllocationTags:      append([]string(nil), spec.AllocationTags...),
	}
	if spec.Resource != nil {
		id.Resource = proto.Clone(spec.Resource).(*yarnpb.ResourceProto)
	}
	if spec.Priority != nil {
		id.Priority = proto.Clone(spec.Priority).(*yarnpb.PriorityProto)
	}
	if spec.LogAggregationContext != nil {
		id.LogAggregationContext = proto.Clone(spec.LogAggregationContext).(*yarnpb.LogAggregationContextProto)
	}
	raw := marshal(id)
	tok := token.Token{
		Identifier: raw,
		Password:   password(key.Secret, raw),
		Kind:       KindContainer,
		Service:    c.m.cfg.TokenService(spec.NodeID.GetHost(), spec.NodeID.GetPort()),
	}
	return tok, id, nil
}

// Verify checks the container token of a startContainers (or
// updateContainer) request as a NodeManager does and returns its decoded
// identifier: its key must be the current, next or a retired key within
// retention ("seems to have an illegally generated token"), its password
// the HMAC of its identifier (InvalidToken), its expiry not past
// (YarnException "Unauthorized request to start container. …") and its
// rmIdentifier this RM's (InvalidContainerException). Checking that the
// NMToken's application matches, and that the container was not started
// before, is the caller's.
func (c ContainerTokens) Verify(tok token.Token) (*yarnpb.ContainerTokenIdentifierProto, error) {
	var id yarnpb.ContainerTokenIdentifierProto
	if err := proto.Unmarshal(tok.Identifier, &id); err != nil || id.GetContainerId().GetAppAttemptId() == nil {
		return nil, yarnerr.InvalidToken.New(msgCannotDeserialize)
	}
	now := c.m.cfg.Clock.Now()
	key := c.m.snap.Load().keys.ContainerToken.find(id.GetMasterKeyId(), now, true, nil)
	if key == nil {
		return &id, yarnerr.InvalidToken.Errorf("Given Container %s seems to have an illegally generated token.",
			containerString(id.GetContainerId()))
	}
	if !hmac.Equal(password(key.Secret, tok.Identifier), tok.Password) {
		return &id, yarnerr.InvalidToken.Errorf("Invalid container token used for starting container on : %s", id.GetNmHostAddr())
	}
	if nowMs := now.UnixMilli(); id.GetExpiryTimeStamp() < nowMs {
		return &id, yarnerr.YarnException.Errorf("Unauthorized request to start container.\n"+
			"This token is expired. current time is %d found %d\n"+
			"Note: System times on machines may be out of sync. Check system time and time zones.",
			nowMs, id.GetExpiryTimeStamp())
	}
	if id.GetRmIdentifier() != c.m.rmIdentifier.Load() {
		return &id, yarnerr.InvalidContainer.Errorf("\nContainer %s rejected as it is allocated by a previous RM",
			containerString(id.GetContainerId()))
	}
	return &id, nil
}

// Sign signs the token of a container RGS made from a bound pod, and returns
// it as the allocate answer carries it.
func (c ContainerTokens) Sign(ctr *yarnpb.ContainerProto, user, nodeLabel string, am bool, logs *yarnpb.LogAggregationContextProto) (*commonpb.TokenProto, error) {
	spec := ContainerTokenSpec{
		ContainerID:           ctr.GetId(),
		NodeID:                ctr.GetNodeId(),
		AppSubmitter:          user,
		Resource:              ctr.GetResource(),
		Priority:              ctr.GetPriority(),
		NodeLabelExpression:   nodeLabel,
		ExecutionType:         ctr.GetExecutionType(),
		Version:               ctr.GetVersion(),
		AllocationRequestID:   ctr.GetAllocationRequestId(),
		LogAggregationContext: logs,
	}
	if am {
		spec.ContainerType = yarnpb.ContainerTypeProto_APPLICATION_MASTER
	}
	tok, _, err := c.Create(spec)
	if err != nil {
		return nil, err
	}
	return tok.Proto(), nil
}
