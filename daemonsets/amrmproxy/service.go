package amrmproxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// Config configures a Service.
type Config struct {
	// Secrets signs the local tokens; required.
	Secrets *Secrets
	// Pipeline names the stages of every attempt's pipeline, first to
	// last (yarn.nodemanager.amrmproxy.interceptor-class.pipeline).
	Pipeline []string
	// Stages maps each name a pipeline may list to its stage.
	Stages map[string]Stage
	// Logger receives the pipelines' logs; none if nil.
	Logger *slog.Logger
	// State keeps each pipeline's attempt across a restart of the node
	// (Recover); nil keeps nothing.
	State AttemptStore
}

// AttemptStore keeps the attempts of the pipelines (FileStore is one).
type AttemptStore interface {
	SaveAttempt(AttemptState) error
	RemoveAttempt(yarnid.AttemptID) error
	LoadAttempts() ([]AttemptState, error)
}

// Resumer is a stage that can serve an attempt whose AM registered with
// an earlier process of the node's: it takes the AM's registration instead
// of sending it again, and rebuilds itself from what it kept (App.Kept).
// A pipeline is recovered only if each of its stages is one.
type Resumer interface {
	Resume(ctx context.Context, register *yarnpb.RegisterApplicationMasterRequestProto) error
}

// Service is the proxy's ApplicationMasterProtocol: it authenticates the
// AM by its local token, finds the attempt's pipeline and passes the call
// to it, numbering the answers for the AM and swapping tokens.
type Service struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	pipelines map[yarnid.AttemptID]*pipeline
}

var _ yarnrpc.ApplicationMasterProtocolServer = (*Service)(nil)

// pipeline is one attempt's stages and what the Service tracks of the AM.
type pipeline struct {
	app    App
	stages []Interceptor

	// mu makes the AM's calls one at a time, as the RM's
	// ApplicationMasterService does per attempt.
	mu sync.Mutex
	// last is the latest answer to the AM, nil before it registered.
	last *yarnpb.AllocateResponseProto
	// rmToken is the newest real token the RM handed out.
	rmToken token.Token
	// register is the AM's registration, nil before it registered.
	register *yarnpb.RegisterApplicationMasterRequestProto
	// resumed is set for a pipeline recovered after the AM registered:
	// its first heartbeat's id is taken as the AM's count.
	resumed bool
	ended   bool

	// smu guards the state as last saved, apart from mu: the stages keep
	// their entries (App.Keep) from their own goroutines while the AM's
	// call holds mu.
	smu  sync.Mutex
	kept AttemptState
	// forgotten is set once the state is removed, so that no late entry
	// writes it again.
	forgotten bool
}

// New returns a Service with no pipelines.
func New(cfg Config) (*Service, error) {
	if cfg.Secrets == nil {
		return nil, errors.New("amrmproxy: no secret manager")
	}
	if len(cfg.Pipeline) == 0 {
		return nil, errors.New("amrmproxy: empty interceptor pipeline")
	}
	for _, n := range cfg.Pipeline {
		if _, ok := cfg.Stages[n]; !ok {
			return nil, fmt.Errorf("amrmproxy: interceptor %q is not one knit-node has", n)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Pipeline = slices.Clone(cfg.Pipeline)
	return &Service{cfg: cfg, log: log, pipelines: map[yarnid.AttemptID]*pipeline{}}, nil
}

// Register serves the Service as ApplicationMasterProtocol on srv, whose
// Config.Tokens must be the Secrets' SecretLookup.
func (s *Service) Register(srv *ipc.Server) error {
	return yarnrpc.RegisterApplicationMasterProtocolServer(srv, s)
}

// StartApplicationMaster builds the pipeline of an AM about to start on
// the node, with its real token, and returns the local token its
// container gets instead. A second start of the same attempt (the
// container prepared again) replaces the pipeline.
func (s *Service) StartApplicationMaster(_ context.Context, attempt yarnid.AttemptID, user string, rmToken token.Token) (token.Token, error) {
	if rmToken.Kind != client.KindAMRMToken {
		return token.Token{}, fmt.Errorf("amrmproxy: start %s: token of kind %q, want %s", attempt, rmToken.Kind, client.KindAMRMToken)
	}
	app := App{Attempt: attempt, User: user, RMToken: rmToken.Clone(), Logger: s.log.With("attempt", attempt.String())}
	p := s.newPipeline(app, AttemptState{Attempt: attempt.String(), User: user})
	stages, err := build(p.app, s.cfg.Pipeline, s.cfg.Stages)
	if err != nil {
		return token.Token{}, err
	}
	p.stages, p.rmToken = stages, app.RMToken
	// Held until saved: the AM may call as soon as p is in place.
	p.mu.Lock()
	defer p.mu.Unlock()
	s.mu.Lock()
	old := s.pipelines[attempt]
	s.pipelines[attempt] = p
	s.mu.Unlock()
	if old != nil {
		// Its state goes with it, before p's is saved.
		if err := s.end(old); err != nil {
			old.app.Logger.Warn("closing the AMRMProxy pipeline", "err", err)
		}
	}
	s.save(p)
	s.log.Info("AMRMProxy pipeline started", "attempt", attempt.String(), "user", user, "interceptors", len(stages))
	return s.cfg.Secrets.Create(attempt), nil
}

// newPipeline is the pipeline of app, whose state starts as kept, with
// app.Keep putting the stages' entries in it.
func (s *Service) newPipeline(app App, kept AttemptState) *pipeline {
	p := &pipeline{app: app, kept: kept}
	if s.cfg.State != nil {
		p.app.Keep = func(key string, value []byte) {
			s.keep(p, func(st *AttemptState) {
				if value == nil {
					delete(st.Entries, key)
					return
				}
				if st.Entries == nil {
					st.Entries = map[string][]byte{}
				}
				st.Entries[key] = slices.Clone(value)
			})
		}
	}
	return p
}

// EndApplication ends the pipelines of an application's attempts, once
// the node learns the application ended: the stages that are Enders end
// first, then every stage closes.
func (s *Service) EndApplication(ctx context.Context, app yarnid.ApplicationID) {
	s.mu.Lock()
	var ended []*pipeline
	for a, p := range s.pipelines {
		if a.App == app {
			ended = append(ended, p)
			delete(s.pipelines, a)
		}
	}
	s.mu.Unlock()
	for _, p := range ended {
		s.abandon(ctx, p)
	}
}

// abandon ends a pipeline whose AM did not finish.
func (s *Service) abandon(ctx context.Context, p *pipeline) {
	p.mu.Lock()
	if !p.ended {
		for _, st := range p.stages {
			if e, ok := st.(Ender); ok {
				if err := e.End(ctx); err != nil {
					p.app.Logger.Warn("ending the AMRMProxy pipeline", "err", err)
				}
			}
		}
	}
	p.mu.Unlock()
	if err := s.end(p); err != nil {
		p.app.Logger.Warn("closing the AMRMProxy pipeline", "err", err)
	}
}

// EndAttempt ends an attempt's pipeline once its AM container is gone,
// so that a failed attempt's pipeline does not wait for the application's
// end; a pipeline already ended is left alone.
func (s *Service) EndAttempt(attempt yarnid.AttemptID) {
	s.mu.Lock()
	p := s.pipelines[attempt]
	delete(s.pipelines, attempt)
	s.mu.Unlock()
	if p != nil {
		if err := s.end(p); err != nil {
			p.app.Logger.Warn("closing the AMRMProxy pipeline", "err", err)
		}
	}
}

// Attempts lists the attempts with a pipeline.
func (s *Service) Attempts() []yarnid.AttemptID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]yarnid.AttemptID, 0, len(s.pipelines))
	for a := range s.pipelines {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b yarnid.AttemptID) int {
		return cmp.Or(cmp.Compare(a.App.ClusterTimestamp, b.App.ClusterTimestamp), cmp.Compare(a.App.ID, b.App.ID), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// Close ends every pipeline, keeping their State: a node stopping (a
// rollout) serves its AMs on once it is back (Recover).
func (s *Service) Close() error {
	s.mu.Lock()
	all := s.pipelines
	s.pipelines = map[yarnid.AttemptID]*pipeline{}
	s.mu.Unlock()
	var errs []error
	for _, p := range all {
		errs = append(errs, s.closePipeline(p, false))
	}
	return errors.Join(errs...)
}

// end closes a pipeline's stages and the attempt's local tokens, once the
// pipeline's call in flight, if any, is done, and forgets its State.
func (s *Service) end(p *pipeline) error { return s.closePipeline(p, true) }

func (s *Service) closePipeline(p *pipeline, forget bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return nil
	}
	p.ended = true
	s.cfg.Secrets.Forget(p.app.Attempt)
	if forget && s.cfg.State != nil {
		p.smu.Lock()
		p.forgotten = true
		if err := s.cfg.State.RemoveAttempt(p.app.Attempt); err != nil {
			p.app.Logger.Warn("forgetting the AMRMProxy pipeline's state", "err", err)
		}
		p.smu.Unlock()
	}
	err := closeAll(p.stages)
	s.log.Info("AMRMProxy pipeline ended", "attempt", p.app.Attempt.String())
	if err != nil {
		return fmt.Errorf("amrmproxy: end %s: %w", p.app.Attempt, err)
	}
	return nil
}

// caller finds the calling AM's token identifier and pipeline.
func (s *Service) caller(ctx context.Context) (*yarnpb.AMRMTokenIdentifierProto, *pipeline, error) {
	c, _ := ipc.CallerFrom(ctx)
	id, ok := c.TokenIdentity.(*yarnpb.AMRMTokenIdentifierProto)
	if !ok {
		// As YarnServerSecurityUtils.authorizeRequest answers a caller
		// without an AMRMToken.
		return nil, nil, yarnerr.AccessControl.Errorf("No AMRMToken found for user %s", c.User)
	}
	attempt, err := yarnid.AttemptIDFromProto(id.GetAppAttemptId())
	if err != nil {
		return nil, nil, yarnerr.AccessControl.Errorf("AMRMToken of %s: %v", c.User, err)
	}
	s.mu.Lock()
	p := s.pipelines[attempt]
	s.mu.Unlock()
	if p == nil {
		return nil, nil, noPipeline(attempt)
	}
	return id, p, nil
}

// enter finds the caller's pipeline and takes its lock, which the caller
// releases; a pipeline that ended meanwhile is as none.
func (s *Service) enter(ctx context.Context) (*yarnpb.AMRMTokenIdentifierProto, *pipeline, error) {
	id, p, err := s.caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	if p.ended {
		p.mu.Unlock()
		return nil, nil, noPipeline(p.app.Attempt)
	}
	return id, p, nil
}

func noPipeline(attempt yarnid.AttemptID) error {
	return yarnerr.YarnException.Errorf("The AM %s is not registered with the AMRMProxy on this node", attempt)
}

// RegisterApplicationMaster passes the register down the pipeline; the AM's
// answers are numbered from 0 again.
func (s *Service) RegisterApplicationMaster(ctx context.Context, req *yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
	_, p, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer p.mu.Unlock()
	resp, err := p.stages[0].RegisterApplicationMaster(ctx, req)
	if err != nil {
		return nil, err
	}
	p.last = &yarnpb.AllocateResponseProto{ResponseId: proto.Int32(0)}
	p.register = proto.Clone(req).(*yarnpb.RegisterApplicationMasterRequestProto)
	p.resumed = false
	s.save(p)
	return resp, nil
}

// Allocate checks the AM's response id as the RM's ApplicationMasterService
// does, passes the heartbeat down the pipeline, keeps any new real token
// out of the answer and puts in a new local one when the node's key rolled.
func (s *Service) Allocate(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
	id, p, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer p.mu.Unlock()
	if p.last == nil && p.resumed {
		// The count the node kept before its restart is gone; the AM's
		// is the one to go on with, and the RM checks it.
		p.last = &yarnpb.AllocateResponseProto{ResponseId: proto.Int32(req.GetResponseId())}
	}
	if p.last == nil {
		return nil, yarnerr.ApplicationMasterNotRegistered.Errorf("AM is not registered for known application attempt: %s or RM had restarted after AM registered. AM should re-register.", p.app.Attempt)
	}
	last := p.last.GetResponseId()
	switch {
	case req.GetResponseId()+1 == last:
		// A resend of the heartbeat already answered.
		return p.last, nil
	case req.GetResponseId() != last:
		return nil, yarnerr.InvalidResponseID(p.app.Attempt.String(), last, req.GetResponseId())
	}
	resp, err := p.stages[0].Allocate(ctx, req)
	if err != nil {
		return nil, err
	}
	resp = proto.Clone(resp).(*yarnpb.AllocateResponseProto)
	if t := resp.GetAmRmToken(); t != nil {
		// The stage that talks to the RM took it in already; the AM
		// must never see it.
		p.rmToken = token.FromProto(t)
		resp.AmRmToken = nil
		p.app.Logger.Info("kept the RM's renewed AMRMToken")
		s.save(p)
	}
	if local, ok := s.cfg.Secrets.Refresh(id); ok {
		resp.AmRmToken = &commonpb.TokenProto{Identifier: local.Identifier, Password: local.Password, Kind: proto.String(local.Kind), Service: proto.String(local.Service)}
		p.app.Logger.Info("handed the AM a local AMRMToken under the node's next key")
	}
	resp.ResponseId = proto.Int32(nextResponseID(last))
	p.last = resp
	return resp, nil
}

// nextResponseID is AMRMClientUtils.getNextResponseId.
func nextResponseID(id int32) int32 { return int32((int64(id) + 1) & math.MaxInt32) }

// FinishApplicationMaster passes the finish down the pipeline; once the
// RM unregistered the attempt, its pipeline ends.
func (s *Service) FinishApplicationMaster(ctx context.Context, req *yarnpb.FinishApplicationMasterRequestProto) (*yarnpb.FinishApplicationMasterResponseProto, error) {
	_, p, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := p.stages[0].FinishApplicationMaster(ctx, req)
	p.mu.Unlock()
	if err != nil || !resp.GetIsUnregistered() {
		return resp, err
	}
	s.mu.Lock()
	if s.pipelines[p.app.Attempt] == p {
		delete(s.pipelines, p.app.Attempt)
	}
	s.mu.Unlock()
	if err := s.end(p); err != nil {
		p.app.Logger.Warn("closing the AMRMProxy pipeline", "err", err)
	}
	return resp, nil
}

// TakeAMRMToken is the token swap of an AM container about to be
// prepared on the node: the real AMRMToken in creds starts the attempt's
// pipeline and is replaced, under the same alias, by the node's local
// token, so the AM's token file never holds the RM's. It reports whether
// creds held an AMRMToken; without one, creds are left alone.
func (s *Service) TakeAMRMToken(ctx context.Context, attempt yarnid.AttemptID, user string, creds *token.Credentials) (bool, error) {
	var aliases []string
	var real token.Token
	for alias, t := range creds.TokensOfKind(client.KindAMRMToken) {
		aliases, real = append(aliases, alias), t
	}
	if len(aliases) == 0 {
		return false, nil
	}
	local, err := s.StartApplicationMaster(ctx, attempt, user, real)
	if err != nil {
		return false, err
	}
	for _, alias := range aliases {
		creds.AddToken(alias, local)
	}
	return true, nil
}

// save keeps p's attempt in the State, if any, with p.mu held or before
// p serves.
func (s *Service) save(p *pipeline) {
	if s.cfg.State == nil {
		return
	}
	var register []byte
	if p.register != nil {
		b, err := proto.Marshal(p.register)
		if err != nil {
			p.app.Logger.Warn("saving the AMRMProxy pipeline's state", "err", err)
			return
		}
		register = b
	}
	s.keep(p, func(st *AttemptState) {
		st.RMToken, st.Registered, st.Register = p.rmToken, register != nil, register
	})
}

// keep changes p's state and saves it whole. A failure is logged: the
// pipeline serves on, and only a restart of the node would lose it.
func (s *Service) keep(p *pipeline, change func(*AttemptState)) {
	p.smu.Lock()
	defer p.smu.Unlock()
	if p.forgotten {
		return
	}
	change(&p.kept)
	if err := s.cfg.State.SaveAttempt(p.kept); err != nil {
		p.app.Logger.Warn("saving the AMRMProxy pipeline's state", "err", err)
	}
}

// Recover rebuilds the pipelines of the attempts the State kept, before
// the Service serves, as YARN's AMRMProxyService.recover does after a
// NodeManager restart: each with its newest real token, resumed with the
// AM's registration and what its stages kept, its local tokens valid
// again. An attempt that cannot be rebuilt (a stage that is not a
// Resumer, or fails to resume) is forgotten and logged; its AM fails as on
// a node without recovery. It reports how many pipelines came back.
func (s *Service) Recover(ctx context.Context) (int, error) {
	if s.cfg.State == nil {
		return 0, nil
	}
	kept, err := s.cfg.State.LoadAttempts()
	if err != nil {
		// What did read is recovered; the rest is named in the log.
		s.log.Warn("reading the AMRMProxy's state", "err", err)
	}
	n := 0
	for _, st := range kept {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		attempt, err := yarnid.ParseAttemptID(st.Attempt)
		if err != nil {
			s.log.Warn("AMRMProxy state of no attempt", "attempt", st.Attempt, "err", err)
			continue
		}
		if err := s.resume(ctx, attempt, st); err != nil {
			s.log.Warn("AMRMProxy pipeline not recovered", "attempt", st.Attempt, "err", err)
			if err := s.cfg.State.RemoveAttempt(attempt); err != nil {
				s.log.Warn("forgetting the AMRMProxy pipeline's state", "attempt", st.Attempt, "err", err)
			}
			continue
		}
		n++
	}
	return n, nil
}

// resume rebuilds one kept attempt's pipeline.
func (s *Service) resume(ctx context.Context, attempt yarnid.AttemptID, st AttemptState) error {
	var register *yarnpb.RegisterApplicationMasterRequestProto
	if st.Registered {
		register = &yarnpb.RegisterApplicationMasterRequestProto{}
		if err := proto.Unmarshal(st.Register, register); err != nil {
			return fmt.Errorf("registration: %w", err)
		}
	}
	if st.RMToken.Kind != client.KindAMRMToken {
		return fmt.Errorf("token of kind %q, want %s", st.RMToken.Kind, client.KindAMRMToken)
	}
	app := App{Attempt: attempt, User: st.User, RMToken: st.RMToken, Logger: s.log.With("attempt", attempt.String()), Kept: maps.Clone(st.Entries)}
	p := s.newPipeline(app, st)
	stages, err := build(p.app, s.cfg.Pipeline, s.cfg.Stages)
	if err != nil {
		return err
	}
	if register != nil {
		for i, stage := range stages {
			r, ok := stage.(Resumer)
			if !ok {
				closeAll(stages)
				return fmt.Errorf("interceptor %s cannot resume an attempt", s.cfg.Pipeline[i])
			}
			if err := r.Resume(ctx, register); err != nil {
				closeAll(stages)
				return fmt.Errorf("interceptor %s: %w", s.cfg.Pipeline[i], err)
			}
		}
	}
	p.stages, p.rmToken, p.register, p.resumed = stages, st.RMToken, register, register != nil
	s.mu.Lock()
	s.pipelines[attempt] = p
	s.mu.Unlock()
	s.cfg.Secrets.Adopt(attempt)
	s.log.Info("AMRMProxy pipeline recovered", "attempt", attempt.String(), "user", st.User, "registered", register != nil)
	return nil
}
