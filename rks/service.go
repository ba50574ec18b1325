package rks

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rks/relay"
)

const (
	dockerImageEnv          = "YARN_CONTAINER_RUNTIME_DOCKER_IMAGE"
	kindAMRM                = "YARN_AM_RM_TOKEN"
	msgInvalidNMToken       = "Invalid NMToken"
	maxContainersPerRequest = 10000
)

// Pods is RKS's view of container pods: RGS owns them (it created them and
// deletes them); RKS reads them from RGS's informer and asks RGS to stop.
type Pods interface {
	// ContainerPod returns an allocated container's pod.
	ContainerPod(id yarnid.ContainerID) (*corev1.Pod, bool)
	// ContainerStatus returns its status as the NodeManager reports it.
	ContainerStatus(id yarnid.ContainerID) (*yarnpb.ContainerStatusProto, bool)
	// StopContainer records that a container the AM stops must end; its
	// pod goes in the background, as a NodeManager's stopContainers
	// answers before the process has ended.
	StopContainer(id yarnid.ContainerID)
	// RequestThreadDump asks the node to signal the container for a thread
	// dump.
	RequestThreadDump(ctx context.Context, id yarnid.ContainerID) error
	// NodeVersion is the container version the node side holds.
	NodeVersion(id yarnid.ContainerID) int32
	// ApplyNodeUpdate gives a container the version and resources of an
	// update token the AM brought.
	ApplyNodeUpdate(ctx context.Context, id yarnid.ContainerID, version int32, r *yarnpb.ResourceProto) error
}

// Tokens checks the tokens of container requests (rm/tokens plays the
// NodeManager's secret managers).
type Tokens interface {
	// VerifyContainerToken checks a ContainerToken's signature, expiry and
	// RM, returning its identifier.
	VerifyContainerToken(tok token.Token) (*yarnpb.ContainerTokenIdentifierProto, error)
	// PinAttempt keeps the NMToken key of an attempt that started a
	// container valid for the attempt's later calls.
	PinAttempt(ctx context.Context, id *yarnpb.NMTokenIdentifierProto) error
}

// Observer hears that a container was started (the RM's container
// LAUNCHED event, which stops the allocation expiry) or took an update the
// AM brought (which stops an increase's roll back).
type Observer interface {
	ContainerStarted(ctx context.Context, id yarnid.ContainerID)
	ContainerUpdated(ctx context.Context, id yarnid.ContainerID, version int32)
}

// Config holds what the service needs.
type Config struct {
	Client kubernetes.Interface
	Pods   Pods
	Tokens Tokens
	// Observer may be nil.
	Observer Observer
	// AuxServices tells which aux services run on each node; nil means
	// none anywhere.
	AuxServices AuxServices
	// NMHTTPPort is the NodeManager web port of every node.
	NMHTTPPort int32
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Service is ContainerManagementProtocol over pods.
type Service struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	starting map[yarnid.ContainerID]bool // being started or started
	launches int
}

// New returns the service.
func New(cfg Config) (*Service, error) {
	if cfg.Client == nil || cfg.Pods == nil || cfg.Tokens == nil {
		return nil, fmt.Errorf("rks: Client, Pods and Tokens are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg, log: cfg.Logger, starting: map[yarnid.ContainerID]bool{}}, nil
}

// AuxServices is where RKS reads the aux services that really run on a
// node: knit-node publishes them on its Node (launch.AnnotationAuxServices).
type AuxServices interface {
	// AuxServices returns the services of the Kubernetes node and their
	// metadata; nil when it runs none.
	AuxServices(nodeName string) map[string][]byte
}

// Register adds ContainerManagementProtocol to srv, whose SecretLookup must
// be the NMToken check (tokens.NMTokens.SecretLookup).
func (s *Service) Register(srv *ipc.Server) error {
	return yarnrpc.RegisterContainerManagementProtocolServer(srv, s)
}

var _ yarnrpc.ContainerManagementProtocolServer = (*Service)(nil)

// unsupported refuses the calls that change a running container's launch
// context, which Knit keeps as it was started.
func unsupported(what string) error {
	return yarnerr.UnsupportedOperation.Errorf("%s is not supported by Knit yet: the container keeps its launch context", what)
}

// Localize refuses (unsupported).
func (s *Service) Localize(context.Context, *yarnpb.ResourceLocalizationRequestProto) (*yarnpb.ResourceLocalizationResponseProto, error) {
	return nil, unsupported("Localizing resources into a running container")
}

// ReInitializeContainer refuses (unsupported).
func (s *Service) ReInitializeContainer(context.Context, *yarnpb.ReInitializeContainerRequestProto) (*yarnpb.ReInitializeContainerResponseProto, error) {
	return nil, unsupported("Re-initializing a container")
}

// RestartContainer refuses (unsupported).
func (s *Service) RestartContainer(context.Context, *yarnpb.ContainerIdProto) (*yarnpb.RestartContainerResponseProto, error) {
	return nil, unsupported("Restarting a container")
}

// RollbackLastReInitialization refuses (unsupported).
func (s *Service) RollbackLastReInitialization(context.Context, *yarnpb.ContainerIdProto) (*yarnpb.RollbackResponseProto, error) {
	return nil, unsupported("Rolling back a container's re-initialization")
}

// CommitLastReInitialization refuses (unsupported).
func (s *Service) CommitLastReInitialization(context.Context, *yarnpb.ContainerIdProto) (*yarnpb.CommitResponseProto, error) {
	return nil, unsupported("Committing a container's re-initialization")
}

// nmToken returns the caller's NMToken identifier: every call on an NM
// port is made with one.
func nmToken(ctx context.Context) (*yarnpb.NMTokenIdentifierProto, error) {
	c, ok := ipc.CallerFrom(ctx)
	if !ok || c.Auth != ipc.AuthToken {
		return nil, yarnerr.YarnException.Errorf("%s", msgInvalidNMToken)
	}
	id, ok := c.TokenIdentity.(*yarnpb.NMTokenIdentifierProto)
	if !ok {
		return nil, yarnerr.YarnException.Errorf("%s", msgInvalidNMToken)
	}
	return id, nil
}

// serialized is a per-container failure as SerializedException carries it.
func serialized(err error) *yarnpb.SerializedExceptionProto {
	class, msg := yarnerr.YarnException, err.Error()
	if e, ok := err.(*yarnerr.Error); ok {
		class, msg = e.Class, e.Message
	}
	return &yarnpb.SerializedExceptionProto{Message: proto.String(msg), ClassName: proto.String(string(class))}
}

func failure(id *yarnpb.ContainerIdProto, err error) *yarnpb.ContainerExceptionMapProto {
	return &yarnpb.ContainerExceptionMapProto{ContainerId: id, Exception: serialized(err)}
}

func (s *Service) StartContainers(ctx context.Context, req *yarnpb.StartContainersRequestProto) (*yarnpb.StartContainersResponseProto, error) {
	nmID, err := nmToken(ctx)
	if err != nil {
		return nil, err
	}
	if len(req.GetStartContainerRequest()) > maxContainersPerRequest {
		return nil, yarnerr.YarnException.Errorf("startContainers with %d requests, more than %d", len(req.GetStartContainerRequest()), maxContainersPerRequest)
	}
	resp := &yarnpb.StartContainersResponseProto{}
	// Every container of one request is for the NodeManager the AM called,
	// so the first pod found names the node whose services answer.
	var services map[string][]byte
	pinned := false
	for _, r := range req.GetStartContainerRequest() {
		ctID, err := s.authorize(ctx, nmID, r.GetContainerToken(), forStart)
		if err != nil {
			resp.FailedRequests = append(resp.FailedRequests, failure(ctID.GetContainerId(), err))
			continue
		}
		if !pinned {
			// NMTokenSecretManagerInNM.appAttemptStartContainer.
			if err := s.cfg.Tokens.PinAttempt(ctx, nmID); err != nil {
				resp.FailedRequests = append(resp.FailedRequests, failure(ctID.GetContainerId(), err))
				continue
			}
			pinned = true
		}
		if services == nil {
			services = s.nodeServices(ctID)
		}
		if err := s.start(ctx, ctID, r.GetContainerLaunchContext(), services); err != nil {
			resp.FailedRequests = append(resp.FailedRequests, failure(ctID.GetContainerId(), err))
			continue
		}
		resp.SucceededRequests = append(resp.SucceededRequests, ctID.GetContainerId())
	}
	resp.ServicesMetaData = servicesMetaData(services)
	return resp, nil
}

// request names a checked request in the NodeManager's refusals.
type request struct {
	unauthorized string // the refusal's first sentence
	using        string // what the NMToken "was used for"
	noToken      string // the refusal of a request without a token
}

var (
	forStart = request{
		unauthorized: "Unauthorized request to start container. ",
		using:        "starting container",
		noToken:      "Container token is not set in the start request",
	}
	forUpdate = request{
		unauthorized: "Unauthorized request to increase container resource.",
		using:        "increasing resource of container",
		noToken:      "Invalid ContainerToken",
	}
)

// authorize is ContainerManagerImpl.authorizeStartAndResourceIncreaseRequest
// with the token checks of verifyAndGetContainerTokenIdentifier.
func (s *Service) authorize(ctx context.Context, nmID *yarnpb.NMTokenIdentifierProto, tp *commonpb.TokenProto, r request) (*yarnpb.ContainerTokenIdentifierProto, error) {
	if tp == nil {
		return nil, yarnerr.YarnException.Errorf("%s", r.noToken)
	}
	ctID, err := s.cfg.Tokens.VerifyContainerToken(token.FromProto(tp))
	if err != nil {
		return ctID, err
	}
	tokenApp := nmID.GetAppAttemptId().GetApplicationId()
	ctrApp := ctID.GetContainerId().GetAppAttemptId().GetApplicationId()
	if !proto.Equal(tokenApp, ctrApp) {
		return ctID, yarnerr.YarnException.Errorf("%s\nNMToken for application attempt : %s was used for %s with container token issued for application attempt : %s",
			r.unauthorized, attemptString(nmID.GetAppAttemptId()), r.using, attemptString(ctID.GetContainerId().GetAppAttemptId()))
	}
	if node, ok := relay.NodeFrom(ctx); ok && node != ctID.GetNmHostAddr() {
		return ctID, yarnerr.InvalidToken.Errorf("%s\nThe container token was issued for NodeManager %s, not for %s", r.unauthorized, ctID.GetNmHostAddr(), node)
	}
	if want := yarnid.NodeString(nmID.GetNodeId()); want != ctID.GetNmHostAddr() {
		return ctID, yarnerr.InvalidToken.Errorf("%s\nThe container token was issued for NodeManager %s, the NMToken for %s", r.unauthorized, ctID.GetNmHostAddr(), want)
	}
	return ctID, nil
}

func attemptString(a *yarnpb.ApplicationAttemptIdProto) string {
	id, err := yarnid.AttemptIDFromProto(a)
	if err != nil {
		return "<invalid attempt>"
	}
	return id.String()
}

// start launches one container whose token was checked.
func (s *Service) start(ctx context.Context, ctID *yarnpb.ContainerTokenIdentifierProto, clc *yarnpb.ContainerLaunchContextProto, services map[string][]byte) error {
	id, err := yarnid.ContainerIDFromProto(ctID.GetContainerId())
	if err != nil {
		return yarnerr.InvalidContainer.Errorf("bad container id: %v", err)
	}
	for _, sd := range clc.GetServiceData() {
		if _, ok := services[sd.GetKey()]; !ok {
			return yarnerr.InvalidAuxService.Errorf("The auxService:%s does not exist", sd.GetKey())
		}
	}
	var creds *token.Credentials
	if len(clc.GetTokens()) > 0 {
		creds, err = token.ParseCredentials(clc.GetTokens())
		if err != nil {
			return yarnerr.YarnException.Errorf("Failed to parse credentials of container %s: %v", id, err)
		}
		// An unset type reads as the enum's first value, APPLICATION_MASTER:
		// only an explicit one counts.
		if ctID.ContainerType == nil || *ctID.ContainerType != yarnpb.ContainerTypeProto_APPLICATION_MASTER {
			// A task must never hold a token it could act as the AM with.
			creds.RemoveTokensOfKind(kindAMRM)
		}
	}
	node, err := yarnid.ParseNodeID(ctID.GetNmHostAddr())
	if err != nil {
		return yarnerr.InvalidContainer.Errorf("container token of %s: %v", id, err)
	}
	return s.Launch(ctx, LaunchRequest{Container: id, User: ctID.GetAppSubmitter(), Node: node, Context: clc, Credentials: creds})
}

// nodeServices are the aux services of the node a container's pod is on.
func (s *Service) nodeServices(ctID *yarnpb.ContainerTokenIdentifierProto) map[string][]byte {
	if s.cfg.AuxServices == nil {
		return nil
	}
	id, err := yarnid.ContainerIDFromProto(ctID.GetContainerId())
	if err != nil {
		return nil
	}
	pod, ok := s.cfg.Pods.ContainerPod(id)
	if !ok || pod.Spec.NodeName == "" {
		return nil
	}
	return s.cfg.AuxServices.AuxServices(pod.Spec.NodeName)
}

// servicesMetaData is what startContainers answers of the node's services
// (ContainerManagerImpl.getAuxServiceMetaData), in name order.
func servicesMetaData(services map[string][]byte) []*yarnpb.StringBytesMapProto {
	out := make([]*yarnpb.StringBytesMapProto, 0, len(services))
	for _, name := range sortedKeys(services) {
		out = append(out, &yarnpb.StringBytesMapProto{Key: proto.String(name), Value: services[name]})
	}
	return out
}

// authorizeAccess is authorizeGetAndStopContainerRequest: an attempt may
// only see and stop its own application's containers.
func authorizeAccess(nmID *yarnpb.NMTokenIdentifierProto, id yarnid.ContainerID, what string) error {
	app, err := yarnid.ApplicationIDFromProto(nmID.GetAppAttemptId().GetApplicationId())
	if err != nil || app != id.Attempt.App {
		return yarnerr.YarnException.Errorf("%s attempted to %s non-application container : %s", attemptString(nmID.GetAppAttemptId()), what, id)
	}
	return nil
}

// notHandled is the NodeManager's answer for a container it does not know.
func notHandled(id yarnid.ContainerID) error {
	return yarnerr.YarnException.Errorf("Container %s is not handled by this NodeManager", id)
}

func (s *Service) StopContainers(ctx context.Context, req *yarnpb.StopContainersRequestProto) (*yarnpb.StopContainersResponseProto, error) {
	nmID, err := nmToken(ctx)
	if err != nil {
		return nil, err
	}
	resp := &yarnpb.StopContainersResponseProto{}
	for _, p := range req.GetContainerId() {
		if err := s.stop(nmID, p); err != nil {
			resp.FailedRequests = append(resp.FailedRequests, failure(p, err))
			continue
		}
		resp.SucceededRequests = append(resp.SucceededRequests, p)
	}
	return resp, nil
}

func (s *Service) stop(nmID *yarnpb.NMTokenIdentifierProto, p *yarnpb.ContainerIdProto) error {
	id, err := yarnid.ContainerIDFromProto(p)
	if err != nil {
		return yarnerr.InvalidContainer.Errorf("bad container id: %v", err)
	}
	if err := authorizeAccess(nmID, id, "stop"); err != nil {
		return err
	}
	status, ok := s.cfg.Pods.ContainerStatus(id)
	if !ok {
		return notHandled(id)
	}
	if status.GetState() == yarnpb.ContainerStateProto_C_COMPLETE {
		return nil // stopping a finished container is a no-op, as in the NM
	}
	s.cfg.Pods.StopContainer(id)
	return nil
}

func (s *Service) GetContainerStatuses(ctx context.Context, req *yarnpb.GetContainerStatusesRequestProto) (*yarnpb.GetContainerStatusesResponseProto, error) {
	nmID, err := nmToken(ctx)
	if err != nil {
		return nil, err
	}
	resp := &yarnpb.GetContainerStatusesResponseProto{}
	for _, p := range req.GetContainerId() {
		id, err := yarnid.ContainerIDFromProto(p)
		if err != nil {
			resp.FailedRequests = append(resp.FailedRequests, failure(p, yarnerr.InvalidContainer.Errorf("bad container id: %v", err)))
			continue
		}
		if err := authorizeAccess(nmID, id, "get status for"); err != nil {
			resp.FailedRequests = append(resp.FailedRequests, failure(p, err))
			continue
		}
		pod, ok := s.cfg.Pods.ContainerPod(id)
		var status *yarnpb.ContainerStatusProto
		if ok && started(pod) {
			status, ok = s.cfg.Pods.ContainerStatus(id)
		}
		if !ok || status == nil {
			resp.FailedRequests = append(resp.FailedRequests, failure(p, notHandled(id)))
			continue
		}
		resp.Status = append(resp.Status, status)
	}
	return resp, nil
}

func (s *Service) GetLocalizationStatuses(ctx context.Context, req *yarnpb.GetLocalizationStatusesRequestProto) (*yarnpb.GetLocalizationStatusesResponseProto, error) {
	nmID, err := nmToken(ctx)
	if err != nil {
		return nil, err
	}
	resp := &yarnpb.GetLocalizationStatusesResponseProto{}
	for _, p := range req.GetContainerId() {
		id, err := yarnid.ContainerIDFromProto(p)
		if err == nil {
			err = authorizeAccess(nmID, id, "get localization statuses of")
		}
		if err == nil {
			err = yarnerr.YarnException.Errorf("Localization statuses of %s are not tracked by Knit", id)
		}
		resp.FailedRequests = append(resp.FailedRequests, failure(p, err))
	}
	return resp, nil
}

func (s *Service) SignalToContainer(ctx context.Context, req *yarnpb.SignalContainerRequestProto) (*yarnpb.SignalContainerResponseProto, error) {
	nmID, err := nmToken(ctx)
	if err != nil {
		return nil, err
	}
	id, err := yarnid.ContainerIDFromProto(req.GetContainerId())
	if err != nil {
		return nil, yarnerr.InvalidContainer.Errorf("bad container id: %v", err)
	}
	if err := authorizeAccess(nmID, id, "signal"); err != nil {
		return nil, err
	}
	if err := s.SignalContainer(ctx, id, nil, req.GetCommand()); err != nil {
		return nil, err
	}
	return &yarnpb.SignalContainerResponseProto{}, nil
}

// SignalContainer delivers a signal command to a running container (from
// the AM, or the client through the RM; node is unused, RKS plays every
// node): the shutdown commands end its pod (SIGTERM, then SIGKILL after the
// grace period); a thread dump reaches the process as SIGQUIT through its
// node (see launch.AnnotationThreadDumps).
func (s *Service) SignalContainer(ctx context.Context, id yarnid.ContainerID, _ *yarnpb.NodeIdProto, cmd yarnpb.SignalContainerCommandProto) error {
	if _, ok := s.cfg.Pods.ContainerPod(id); !ok {
		return notHandled(id)
	}
	switch cmd {
	case yarnpb.SignalContainerCommandProto_GRACEFUL_SHUTDOWN, yarnpb.SignalContainerCommandProto_FORCEFUL_SHUTDOWN:
		s.cfg.Pods.StopContainer(id)
		return nil
	case yarnpb.SignalContainerCommandProto_OUTPUT_THREAD_DUMP:
		if err := s.cfg.Pods.RequestThreadDump(ctx, id); err != nil {
			return yarnerr.YarnException.Errorf("signalling %s: %v", id, err)
		}
		return nil
	}
	return yarnerr.UnsupportedOperation.Errorf("signal %s is not supported by Knit yet", cmd)
}

func (s *Service) IncreaseContainersResource(ctx context.Context, req *yarnpb.IncreaseContainersResourceRequestProto) (*yarnpb.IncreaseContainersResourceResponseProto, error) {
	resp, err := s.UpdateContainer(ctx, &yarnpb.ContainerUpdateRequestProto{UpdateContainerToken: req.GetIncreaseContainers()})
	if err != nil {
		return nil, err
	}
	return &yarnpb.IncreaseContainersResourceResponseProto{SucceededRequests: resp.GetSucceededRequests(), FailedRequests: resp.GetFailedRequests()}, nil
}

// UpdateContainer is the NodeManager's updateContainer: each token checked
// as for a start, then its version against the one the node holds; the pod
// takes the token's resources (RGS resized it already when the RM granted
// an increase, so this mostly records the version).
func (s *Service) UpdateContainer(ctx context.Context, req *yarnpb.ContainerUpdateRequestProto) (*yarnpb.ContainerUpdateResponseProto, error) {
	nmID, err := nmToken(ctx)
	if err != nil {
		return nil, err
	}
	if len(req.GetUpdateContainerToken()) > maxContainersPerRequest {
		return nil, yarnerr.YarnException.Errorf("updateContainer with %d tokens, more than %d", len(req.GetUpdateContainerToken()), maxContainersPerRequest)
	}
	resp := &yarnpb.ContainerUpdateResponseProto{}
	for _, tp := range req.GetUpdateContainerToken() {
		ctID, err := s.authorize(ctx, nmID, tp, forUpdate)
		if err == nil {
			err = s.update(ctx, ctID)
		}
		if err != nil {
			resp.FailedRequests = append(resp.FailedRequests, failure(ctID.GetContainerId(), err))
			continue
		}
		resp.SucceededRequests = append(resp.SucceededRequests, ctID.GetContainerId())
	}
	return resp, nil
}

// update applies one checked update token (updateContainerInternal).
func (s *Service) update(ctx context.Context, ctID *yarnpb.ContainerTokenIdentifierProto) error {
	id, err := yarnid.ContainerIDFromProto(ctID.GetContainerId())
	if err != nil {
		return yarnerr.InvalidContainer.Errorf("bad container id: %v", err)
	}
	p, ok := s.cfg.Pods.ContainerPod(id)
	if !ok || p.Annotations[launch.AnnotationContext] == "" {
		return notHandled(id) // never started on a node
	}
	if cur := s.cfg.Pods.NodeVersion(id); cur >= ctID.GetVersion() {
		return yarnerr.YarnException.Errorf("Container %s has update version [%d] >= requested version [%d]", id, cur, ctID.GetVersion())
	}
	if err := s.cfg.Pods.ApplyNodeUpdate(ctx, id, ctID.GetVersion(), ctID.GetResource()); err != nil {
		return yarnerr.YarnException.Errorf("Unable to update container %s: %v", id, err)
	}
	s.log.InfoContext(ctx, "container updated", "container", id.String(), "version", ctID.GetVersion())
	if s.cfg.Observer != nil {
		s.cfg.Observer.ContainerUpdated(ctx, id, ctID.GetVersion())
	}
	return nil
}
