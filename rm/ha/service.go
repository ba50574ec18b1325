package ha

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/commonrpc"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
)

// Messages of HAServiceProtocol's refusals, YARN's own where YARN refuses
// the same call.
const (
	msgManualFailover = "Manual failover for this ResourceManager is disallowed, because automatic failover is enabled."
	msgNoForcedActive = "This ResourceManager becomes active only by winning its Lease; a forced transition to active cannot take it from the leader"
	msgUnhealthy      = "Active ResourceManager services are not running!"
	deniedFormat      = "User %s doesn't have permission to call '%s'"
)

// ServiceConfig is what NewService needs. Active and Authorize are required.
type ServiceConfig struct {
	// Active reports whether this replica is the active RM.
	Active func() bool
	// Running reports, on the active RM, whether its services run; nil
	// means they do.
	Running func() bool
	// Authorize reports whether the caller may administer the RM
	// (yarn.admin.acl), as RMServerUtils.verifyAdminAccess checks every
	// HAServiceProtocol call.
	Authorize func(ctx context.Context, user string) bool
	// StepDown, if set, makes the active RM give up its Lease (a forced
	// transition to standby): it stops, and comes back as a standby.
	StepDown func()
}

// Service serves HAServiceProtocol on the admin port. Failover is
// automatic (the Lease), so manual transitions are refused unless forced,
// as YARN's AdminService refuses them.
type Service struct{ cfg ServiceConfig }

// NewService returns the HAServiceProtocol server of cfg.
func NewService(cfg ServiceConfig) (*Service, error) {
	if cfg.Active == nil || cfg.Authorize == nil {
		return nil, fmt.Errorf("ha: service: Active and Authorize are required")
	}
	return &Service{cfg: cfg}, nil
}

// Register serves the protocol on srv.
func (s *Service) Register(srv *ipc.Server) error {
	return commonrpc.RegisterHAServiceProtocolServer(srv, s)
}

func (s *Service) checkAccess(ctx context.Context, method string) error {
	c, _ := ipc.CallerFrom(ctx)
	user := shortName(c.User)
	if !s.cfg.Authorize(ctx, user) {
		return yarnerr.AccessControl.New(fmt.Sprintf(deniedFormat, user, method))
	}
	return nil
}

// shortName is a Kerberos principal's short name, as getShortUserName.
func shortName(user string) string {
	for i := 0; i < len(user); i++ {
		if user[i] == '/' || user[i] == '@' {
			return user[:i]
		}
	}
	return user
}

// GetServiceStatus answers ACTIVE or STANDBY from the Lease.
func (s *Service) GetServiceStatus(ctx context.Context, _ *commonpb.GetServiceStatusRequestProto) (*commonpb.GetServiceStatusResponseProto, error) {
	if err := s.checkAccess(ctx, "getServiceState"); err != nil {
		return nil, err
	}
	state := commonpb.HAServiceStateProto_STANDBY
	if s.cfg.Active() {
		state = commonpb.HAServiceStateProto_ACTIVE
	}
	// Every replica takes part in the election, so each is ready.
	return &commonpb.GetServiceStatusResponseProto{State: state.Enum(), ReadyToBecomeActive: proto.Bool(true)}, nil
}

// MonitorHealth fails only on an active RM whose services do not run.
func (s *Service) MonitorHealth(ctx context.Context, _ *commonpb.MonitorHealthRequestProto) (*commonpb.MonitorHealthResponseProto, error) {
	if err := s.checkAccess(ctx, "monitorHealth"); err != nil {
		return nil, err
	}
	if s.cfg.Active() && s.cfg.Running != nil && !s.cfg.Running() {
		return nil, yarnerr.HealthCheckFailed.New(msgUnhealthy)
	}
	return &commonpb.MonitorHealthResponseProto{}, nil
}

// TransitionToActive is refused: only the Lease makes an RM active. On the
// active RM a forced request has nothing to do.
func (s *Service) TransitionToActive(ctx context.Context, req *commonpb.TransitionToActiveRequestProto) (*commonpb.TransitionToActiveResponseProto, error) {
	if err := s.checkTransition(ctx, "transitionToActive", req.GetReqInfo()); err != nil {
		return nil, err
	}
	if !s.cfg.Active() {
		return nil, yarnerr.ServiceFailed.New(msgNoForcedActive)
	}
	return &commonpb.TransitionToActiveResponseProto{}, nil
}

// TransitionToStandby, forced, makes the active RM step down: it releases
// its Lease and restarts as a standby. A standby has nothing to do.
func (s *Service) TransitionToStandby(ctx context.Context, req *commonpb.TransitionToStandbyRequestProto) (*commonpb.TransitionToStandbyResponseProto, error) {
	if err := s.checkTransition(ctx, "transitionToStandby", req.GetReqInfo()); err != nil {
		return nil, err
	}
	if s.cfg.Active() {
		if s.cfg.StepDown == nil {
			return nil, yarnerr.ServiceFailed.New("Error when transitioning to Standby mode")
		}
		s.cfg.StepDown()
	}
	return &commonpb.TransitionToStandbyResponseProto{}, nil
}

// checkTransition is AdminService.checkHaStateChange with automatic
// failover on: a plain user request is refused, a forced one or a failover
// controller's goes on.
func (s *Service) checkTransition(ctx context.Context, method string, info *commonpb.HAStateChangeRequestInfoProto) error {
	if err := s.checkAccess(ctx, method); err != nil {
		return err
	}
	if info.GetReqSource() == commonpb.HARequestSource_REQUEST_BY_USER {
		return yarnerr.AccessControl.New(msgManualFailover)
	}
	return nil
}
