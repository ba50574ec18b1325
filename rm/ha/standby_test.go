package ha

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/commonrpc"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

const standbyMessage = "ResourceManager rm2 is not Active!"

// serveStandby serves HAServiceProtocol behind a standby's admission, as
// knit-rm's standby serves each of its ports.
func serveStandby(t *testing.T, cfg ipc.Config, svc ServiceConfig) string {
	t.Helper()
	a := Admission{ID: "rm2"}
	cfg.AdmitCall = a.AdmitCall
	if cfg.Tokens != nil {
		cfg.Tokens = a.Tokens(nil)
	}
	s, err := NewService(svc)
	if err != nil {
		t.Fatal(err)
	}
	return ipctest.Serve(t, cfg, commonrpc.HAServiceProtocolName, commonrpc.HAServiceProtocolMethods(s)...)
}

func client(t *testing.T, addr string, cfg ipc.ClientConfig) *ipc.Client {
	t.Helper()
	cfg.Errors = yarnerr.FromRemote
	c, err := ipc.NewClient(addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantClass(t *testing.T, err error, class yarnerr.Class, msg string) {
	t.Helper()
	e, ok := yarnerr.Find(err)
	if !ok || e.Class != class || (msg != "" && e.Message != msg) {
		t.Errorf("err = %v, want %s %q", err, class, msg)
	}
}

func admins(_ context.Context, user string) bool { return user == "yarn" }

func TestAStandbyAnswersStandbyExceptionOnEveryProtocol(t *testing.T) {
	addr := serveStandby(t, ipc.Config{Simple: true}, ServiceConfig{Active: func() bool { return false }, Authorize: admins})

	rm := yarnrpc.NewApplicationClientProtocolClient(client(t, addr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "alice"}))
	_, err := rm.GetNewApplication(ctx(t), &yarnpb.GetNewApplicationRequestProto{})
	wantClass(t, err, yarnerr.Standby, standbyMessage)

	admin := yarnrpc.NewResourceManagerAdministrationProtocolClient(client(t, addr, ipc.ClientConfig{Protocol: yarnrpc.ResourceManagerAdministrationProtocolName, User: "yarn"}))
	_, err = admin.RefreshQueues(ctx(t), &yarnpb.RefreshQueuesRequestProto{})
	wantClass(t, err, yarnerr.Standby, standbyMessage)

	// HAServiceProtocol answers: that is how a client learns who is active.
	hac := commonrpc.NewHAServiceProtocolClient(client(t, addr, ipc.ClientConfig{Protocol: commonrpc.HAServiceProtocolName, User: "yarn"}))
	st, err := hac.GetServiceStatus(ctx(t), &commonpb.GetServiceStatusRequestProto{})
	if err != nil || st.GetState() != commonpb.HAServiceStateProto_STANDBY {
		t.Errorf("getServiceStatus = %v, %v; want STANDBY", st, err)
	}
}

func TestAStandbyRefusesTokenLoginsWithStandbyException(t *testing.T) {
	addr := serveStandby(t, ipc.Config{Tokens: ipctest.TokenLookup}, ServiceConfig{Active: func() bool { return false }, Authorize: admins})
	tok := &commonpb.TokenProto{Identifier: []byte("appattempt_1_0001_000001"), Password: []byte("pw-appattempt_1_0001_000001"),
		Kind: proto.String("YARN_AM_RM_TOKEN"), Service: proto.String(addr)}
	am := yarnrpc.NewApplicationMasterProtocolClient(client(t, addr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationMasterProtocolName, Token: tok}))
	_, err := am.Allocate(ctx(t), &yarnpb.AllocateRequestProto{})
	wantClass(t, err, yarnerr.Standby, standbyMessage)
}

func TestHAServiceProtocol(t *testing.T) {
	var steppedDown bool
	tests := []struct {
		name      string
		active    bool
		running   bool
		user      string
		call      func(c *commonrpc.HAServiceProtocolClient) error
		wantClass yarnerr.Class
		wantMsg   string
		wantStep  bool
	}{
		{"a non-admin may not ask the state", true, true, "alice", func(c *commonrpc.HAServiceProtocolClient) error {
			_, err := c.GetServiceStatus(ctx(t), &commonpb.GetServiceStatusRequestProto{})
			return err
		}, yarnerr.AccessControl, "User alice doesn't have permission to call 'getServiceState'", false},
		{"the active answers ACTIVE", true, true, "yarn", func(c *commonrpc.HAServiceProtocolClient) error {
			st, err := c.GetServiceStatus(ctx(t), &commonpb.GetServiceStatusRequestProto{})
			if err == nil && st.GetState() != commonpb.HAServiceStateProto_ACTIVE {
				return errors.New("not ACTIVE: " + st.GetState().String())
			}
			return err
		}, "", "", false},
		{"a healthy active passes the health check", true, true, "yarn", func(c *commonrpc.HAServiceProtocolClient) error {
			_, err := c.MonitorHealth(ctx(t), &commonpb.MonitorHealthRequestProto{})
			return err
		}, "", "", false},
		{"an active whose services stopped fails it", true, false, "yarn", func(c *commonrpc.HAServiceProtocolClient) error {
			_, err := c.MonitorHealth(ctx(t), &commonpb.MonitorHealthRequestProto{})
			return err
		}, yarnerr.HealthCheckFailed, msgUnhealthy, false},
		{"manual failover is refused under automatic failover", true, true, "yarn", func(c *commonrpc.HAServiceProtocolClient) error {
			_, err := c.TransitionToStandby(ctx(t), &commonpb.TransitionToStandbyRequestProto{ReqInfo: &commonpb.HAStateChangeRequestInfoProto{ReqSource: commonpb.HARequestSource_REQUEST_BY_USER.Enum()}})
			return err
		}, yarnerr.AccessControl, msgManualFailover, false},
		{"a forced transition to standby steps the active down", true, true, "yarn", func(c *commonrpc.HAServiceProtocolClient) error {
			_, err := c.TransitionToStandby(ctx(t), &commonpb.TransitionToStandbyRequestProto{ReqInfo: &commonpb.HAStateChangeRequestInfoProto{ReqSource: commonpb.HARequestSource_REQUEST_BY_USER_FORCED.Enum()}})
			return err
		}, "", "", true},
		{"a forced transition to active cannot take the Lease", false, true, "yarn", func(c *commonrpc.HAServiceProtocolClient) error {
			_, err := c.TransitionToActive(ctx(t), &commonpb.TransitionToActiveRequestProto{ReqInfo: &commonpb.HAStateChangeRequestInfoProto{ReqSource: commonpb.HARequestSource_REQUEST_BY_USER_FORCED.Enum()}})
			return err
		}, yarnerr.ServiceFailed, msgNoForcedActive, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steppedDown = false
			s, err := NewService(ServiceConfig{
				Active: func() bool { return tt.active }, Running: func() bool { return tt.running },
				Authorize: admins, StepDown: func() { steppedDown = true },
			})
			if err != nil {
				t.Fatal(err)
			}
			addr := ipctest.Serve(t, ipc.Config{Simple: true}, commonrpc.HAServiceProtocolName, commonrpc.HAServiceProtocolMethods(s)...)
			err = tt.call(commonrpc.NewHAServiceProtocolClient(client(t, addr, ipc.ClientConfig{Protocol: commonrpc.HAServiceProtocolName, User: tt.user})))
			if tt.wantClass == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
			} else {
				wantClass(t, err, tt.wantClass, tt.wantMsg)
			}
			if steppedDown != tt.wantStep {
				t.Errorf("stepped down = %v, want %v", steppedDown, tt.wantStep)
			}
		})
	}
}
