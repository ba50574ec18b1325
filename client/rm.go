package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// caller is the part of *ipc.Client the clients use, so tests can step in
// between a client and its connection.
type caller interface {
	Call(ctx context.Context, method string, req, resp proto.Message) error
	Close() error
}

// DefaultPollInterval is how often RMClient asks after a submission or a
// kill (yarn.client.application-client-protocol.poll-interval-ms).
const DefaultPollInterval = 200 * time.Millisecond

// RMConfig configures an RMClient.
type RMConfig struct {
	// User is the user the calls run as (SIMPLE authentication); required
	// unless Token is set.
	User string
	// RealUser, if set, is the user User is a proxy user of, as a
	// YarnClient run by a proxy UGI names both; its calls, and a
	// delegation token it asks for, are User's on RealUser's behalf.
	RealUser string
	// Token, if set, authenticates the calls with an RM delegation token
	// (SASL TOKEN over DIGEST-MD5), as a YarnClient whose credentials hold
	// one for the RM's address does; the calls then run as its owner.
	Token *commonpb.TokenProto
	// PollInterval paces SubmitApplication and KillApplication; zero means
	// DefaultPollInterval.
	PollInterval time.Duration
	// Logger receives progress messages; nil means slog.Default().
	Logger *slog.Logger
}

// RMClient calls a ResourceManager's ApplicationClientProtocol: the part of
// Hadoop's YarnClient that submits, watches and kills applications. It is
// safe for concurrent use.
type RMClient struct {
	conn caller
	rpc  *yarnrpc.ApplicationClientProtocolClient
	cfg  RMConfig
	log  *slog.Logger
	addr string
}

// NewRMClient returns a client of the RM's client service at addr
// (yarn.resourcemanager.address); it connects on the first call. An addr
// listing several RMs (HA, see Addresses) fails over between them.
func NewRMClient(addr string, cfg RMConfig) (*RMClient, error) {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	dial := func(addr string, ha bool) (caller, error) {
		cc := ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: cfg.User, RealUser: cfg.RealUser, Token: cfg.Token, Logger: log, Errors: yarnerr.FromRemote}
		if ha {
			cc.NewBackOff = noConnectRetries
		}
		return ipc.NewClient(addr, cc)
	}
	var rpc caller
	var err error
	if addrs := Addresses(addr); len(addrs) > 1 {
		rpc, err = newFailover(addrs, func(a string) (caller, error) { return dial(a, true) }, log)
	} else {
		rpc, err = newStandbyRetry(addr, func(a string) (caller, error) { return dial(a, false) }, log)
	}
	if err != nil {
		return nil, fmt.Errorf("client: new RM client: %w", err)
	}
	return &RMClient{conn: rpc, rpc: yarnrpc.NewApplicationClientProtocolClient(rpc), cfg: cfg, log: log.With("rm", addr), addr: addr}, nil
}

// Close closes the connection.
func (c *RMClient) Close() error { return c.conn.Close() }

// GetNewApplication asks the RM for a new application id and the largest
// container it grants.
func (c *RMClient) GetNewApplication(ctx context.Context) (*yarnpb.GetNewApplicationResponseProto, error) {
	resp, err := c.rpc.GetNewApplication(ctx, &yarnpb.GetNewApplicationRequestProto{})
	if err != nil {
		return nil, fmt.Errorf("client: get new application: %w", err)
	}
	return resp, nil
}

// SubmitApplication submits asc and waits until the RM has accepted it,
// as YarnClientImpl.submitApplication does: it polls the report until the
// state leaves NEW, NEW_SAVING and SUBMITTED, fails if the application
// ends FAILED or KILLED there, and submits again if the RM lost it (an RM
// restart before it stored the submission).
func (c *RMClient) SubmitApplication(ctx context.Context, asc *yarnpb.ApplicationSubmissionContextProto) error {
	appID := appString(asc.GetApplicationId())
	req := &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: asc}
	submit := func() error {
		if _, err := c.rpc.SubmitApplication(ctx, req); err != nil {
			return fmt.Errorf("client: submit application %s: %w", appID, err)
		}
		return nil
	}
	if err := submit(); err != nil {
		return err
	}
	for polls := 1; ; polls++ {
		report, err := c.GetApplicationReport(ctx, asc.GetApplicationId())
		switch {
		case errors.Is(err, yarnerr.ApplicationNotFound):
			c.log.Info("resubmitting application the RM does not know", "app", appID)
			if err := submit(); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("client: wait for submission of %s: %w", appID, err)
		default:
			switch state := report.GetYarnApplicationState(); state {
			case yarnpb.YarnApplicationStateProto_NEW, yarnpb.YarnApplicationStateProto_NEW_SAVING,
				yarnpb.YarnApplicationStateProto_SUBMITTED:
				if polls%10 == 0 {
					c.log.Info("application submission not finished", "app", appID, "state", state.String())
				}
			case yarnpb.YarnApplicationStateProto_FAILED, yarnpb.YarnApplicationStateProto_KILLED:
				return fmt.Errorf("client: Failed to submit %s to YARN : %s", appID, report.GetDiagnostics())
			default:
				c.log.Info("submitted application", "app", appID, "state", state.String())
				return nil
			}
		}
		if err := sleep(ctx, c.cfg.PollInterval); err != nil {
			return fmt.Errorf("client: wait for submission of %s: %w", appID, err)
		}
	}
}

// GetDelegationToken asks the RM for a delegation token that renewer may
// renew (YarnClient.getRMDelegationToken).
func (c *RMClient) GetDelegationToken(ctx context.Context, renewer string) (*commonpb.TokenProto, error) {
	resp, err := c.rpc.GetDelegationToken(ctx, &commonpb.GetDelegationTokenRequestProto{Renewer: proto.String(renewer)})
	if err != nil {
		return nil, fmt.Errorf("client: get delegation token: %w", err)
	}
	return resp.GetToken(), nil
}

// RenewDelegationToken extends a delegation token the caller may renew
// and returns its new expiry.
func (c *RMClient) RenewDelegationToken(ctx context.Context, tok *commonpb.TokenProto) (time.Time, error) {
	resp, err := c.rpc.RenewDelegationToken(ctx, &commonpb.RenewDelegationTokenRequestProto{Token: tok})
	if err != nil {
		return time.Time{}, fmt.Errorf("client: renew delegation token: %w", err)
	}
	return time.UnixMilli(int64(resp.GetNewExpiryTime())), nil
}

// CancelDelegationToken asks the RM to forget a delegation token.
func (c *RMClient) CancelDelegationToken(ctx context.Context, tok *commonpb.TokenProto) error {
	if _, err := c.rpc.CancelDelegationToken(ctx, &commonpb.CancelDelegationTokenRequestProto{Token: tok}); err != nil {
		return fmt.Errorf("client: cancel delegation token: %w", err)
	}
	return nil
}

// GetApplicationReport returns the RM's report of an application.
func (c *RMClient) GetApplicationReport(ctx context.Context, appID *yarnpb.ApplicationIdProto) (*yarnpb.ApplicationReportProto, error) {
	req := &yarnpb.GetApplicationReportRequestProto{ApplicationId: appID}
	resp, err := c.rpc.GetApplicationReport(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("client: get report of %s: %w", appString(appID), err)
	}
	return resp.GetApplicationReport(), nil
}

// KillApplication asks the RM to kill an application and repeats the
// request until the RM says the kill is complete, as YarnClientImpl does.
// An empty diagnostics leaves the RM's own message.
func (c *RMClient) KillApplication(ctx context.Context, appID *yarnpb.ApplicationIdProto, diagnostics string) error {
	req := &yarnpb.KillApplicationRequestProto{ApplicationId: appID}
	if diagnostics != "" {
		req.Diagnostics = proto.String(diagnostics)
	}
	for polls := 1; ; polls++ {
		resp, err := c.rpc.ForceKillApplication(ctx, req)
		if err != nil {
			return fmt.Errorf("client: kill %s: %w", appString(appID), err)
		}
		if resp.GetIsKillCompleted() {
			c.log.Info("killed application", "app", appString(appID))
			return nil
		}
		if polls%10 == 0 {
			c.log.Info("waiting for application to be killed", "app", appString(appID))
		}
		if err := sleep(ctx, c.cfg.PollInterval); err != nil {
			return fmt.Errorf("client: wait for kill of %s: %w", appString(appID), err)
		}
	}
}

// GetApplicationAttempts returns the reports of an application's attempts.
func (c *RMClient) GetApplicationAttempts(ctx context.Context, appID *yarnpb.ApplicationIdProto) ([]*yarnpb.ApplicationAttemptReportProto, error) {
	req := &yarnpb.GetApplicationAttemptsRequestProto{ApplicationId: appID}
	resp, err := c.rpc.GetApplicationAttempts(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("client: get attempts of %s: %w", appString(appID), err)
	}
	return resp.GetApplicationAttempts(), nil
}

// GetContainers returns the reports of an attempt's containers.
func (c *RMClient) GetContainers(ctx context.Context, attemptID *yarnpb.ApplicationAttemptIdProto) ([]*yarnpb.ContainerReportProto, error) {
	req := &yarnpb.GetContainersRequestProto{ApplicationAttemptId: attemptID}
	resp, err := c.rpc.GetContainers(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("client: get containers of %s: %w", attemptString(attemptID), err)
	}
	return resp.GetContainers(), nil
}

// GetResourceTypeInfo returns the resource types the cluster knows
// (memory-mb, vcores and any others).
func (c *RMClient) GetResourceTypeInfo(ctx context.Context) ([]*yarnpb.ResourceTypeInfoProto, error) {
	resp, err := c.rpc.GetResourceTypeInfo(ctx, &yarnpb.GetAllResourceTypeInfoRequestProto{})
	if err != nil {
		return nil, fmt.Errorf("client: get resource types: %w", err)
	}
	return resp.GetResourceTypeInfo(), nil
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// appString names an application id for messages.
func appString(id *yarnpb.ApplicationIdProto) string {
	if a, err := yarnid.ApplicationIDFromProto(id); err == nil {
		return a.String()
	}
	return fmt.Sprint(id)
}

// attemptString names an attempt id for messages.
func attemptString(id *yarnpb.ApplicationAttemptIdProto) string {
	if a, err := yarnid.AttemptIDFromProto(id); err == nil {
		return a.String()
	}
	return fmt.Sprint(id)
}
