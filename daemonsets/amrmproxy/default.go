package amrmproxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// DefaultInterceptor is the last stage (YARN's DefaultRequestInterceptor):
// it calls the home RM with the attempt's real AMRMToken through Knit's
// AMRM client, which keeps the RM's renewed tokens for its next
// connections, and registers again, resending the outstanding asks, when
// the RM lost the attempt (an RM failover).
type DefaultInterceptor struct {
	rm *client.AMRMClient
}

var (
	_ Interceptor = (*DefaultInterceptor)(nil)
	_ Resumer     = (*DefaultInterceptor)(nil)
)

// DefaultStage returns the stage of a DefaultInterceptor calling the RM's
// scheduler at addr (comma-separated with RM HA). newBackOff paces retries
// of an unreachable RM; nil means the client's default.
func DefaultStage(addr string, newBackOff func() backoff.BackOff) Stage {
	return func(app App, next Interceptor) (Interceptor, error) {
		if next != nil {
			return nil, errors.New("the default interceptor must be the last of the pipeline")
		}
		rm, err := client.NewAMRMClient(addr, client.AMRMConfig{Token: app.RMToken, NewBackOff: newBackOff, Logger: app.Logger})
		if err != nil {
			return nil, err
		}
		return &DefaultInterceptor{rm: rm}, nil
	}
}

// RegisterApplicationMaster registers the attempt with the RM.
func (d *DefaultInterceptor) RegisterApplicationMaster(ctx context.Context, req *yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
	return d.rm.Register(ctx, req.GetHost(), req.GetRpcPort(), req.GetTrackingUrl())
}

// Allocate sends the heartbeat; the client numbers it towards the RM.
func (d *DefaultInterceptor) Allocate(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
	return d.rm.Allocate(ctx, req)
}

// FinishApplicationMaster unregisters; the client repeats the call until
// the RM has unregistered the attempt, so the answer says so.
func (d *DefaultInterceptor) FinishApplicationMaster(ctx context.Context, req *yarnpb.FinishApplicationMasterRequestProto) (*yarnpb.FinishApplicationMasterResponseProto, error) {
	if err := d.rm.Finish(ctx, req.GetFinalApplicationStatus(), req.GetDiagnostics(), req.GetTrackingUrl()); err != nil {
		return nil, fmt.Errorf("amrmproxy: %w", err)
	}
	return &yarnpb.FinishApplicationMasterResponseProto{IsUnregistered: proto.Bool(true)}, nil
}

// Resume takes the registration the AM made before the node restarted; the
// client learns the RM's response id from its first heartbeat.
func (d *DefaultInterceptor) Resume(_ context.Context, register *yarnpb.RegisterApplicationMasterRequestProto) error {
	d.rm.Resume(register)
	return nil
}

// Close closes the connection to the RM.
func (d *DefaultInterceptor) Close() error { return d.rm.Close() }
