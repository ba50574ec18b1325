package client

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// fakeRM plays the RM's ClientRMService: reports walk through states, kills
// complete after a number of calls.
type fakeRM struct {
	mu          sync.Mutex
	submissions int
	reports     int
	kills       int
	users       []string
	// states are the report states in order; the last one repeats. A zero
	// state answers ApplicationNotFoundException.
	states []yarnpb.YarnApplicationStateProto
	// killsNeeded is the call on which the kill completes.
	killsNeeded int
}

func (f *fakeRM) methods() []ipc.Method {
	return yarnrpc.ApplicationClientProtocolFuncs{
		GetNewApplication: func(ctx context.Context, _ *yarnpb.GetNewApplicationRequestProto) (*yarnpb.GetNewApplicationResponseProto, error) {
			f.record(ctx)
			return &yarnpb.GetNewApplicationResponseProto{ApplicationId: testApp.Proto(), MaximumCapability: yarnpb.NewResource(8192, 4)}, nil
		},
		SubmitApplication: func(ctx context.Context, _ *yarnpb.SubmitApplicationRequestProto) (*yarnpb.SubmitApplicationResponseProto, error) {
			f.record(ctx)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.submissions++
			return &yarnpb.SubmitApplicationResponseProto{}, nil
		},
		GetApplicationReport: func(ctx context.Context, req *yarnpb.GetApplicationReportRequestProto) (*yarnpb.GetApplicationReportResponseProto, error) {
			f.record(ctx)
			f.mu.Lock()
			defer f.mu.Unlock()
			state := f.states[min(f.reports, len(f.states)-1)]
			f.reports++
			if state == 0 {
				return nil, yarnerr.ApplicationNotFound.Errorf("Application with id '%s' doesn't exist in RM.", testApp)
			}
			return &yarnpb.GetApplicationReportResponseProto{ApplicationReport: &yarnpb.ApplicationReportProto{
				ApplicationId:          req.GetApplicationId(),
				YarnApplicationState:   state.Enum(),
				FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_UNDEFINED.Enum(),
				Diagnostics:            proto.String("queue is stopped"),
			}}, nil
		},
		ForceKillApplication: func(ctx context.Context, _ *yarnpb.KillApplicationRequestProto) (*yarnpb.KillApplicationResponseProto, error) {
			f.record(ctx)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.kills++
			return &yarnpb.KillApplicationResponseProto{IsKillCompleted: proto.Bool(f.kills >= f.killsNeeded)}, nil
		},
		GetApplicationAttempts: func(ctx context.Context, req *yarnpb.GetApplicationAttemptsRequestProto) (*yarnpb.GetApplicationAttemptsResponseProto, error) {
			f.record(ctx)
			return &yarnpb.GetApplicationAttemptsResponseProto{ApplicationAttempts: []*yarnpb.ApplicationAttemptReportProto{{
				ApplicationAttemptId: &yarnpb.ApplicationAttemptIdProto{ApplicationId: req.GetApplicationId(), AttemptId: proto.Int32(1)},
			}}}, nil
		},
		GetContainers: func(ctx context.Context, req *yarnpb.GetContainersRequestProto) (*yarnpb.GetContainersResponseProto, error) {
			f.record(ctx)
			return &yarnpb.GetContainersResponseProto{Containers: []*yarnpb.ContainerReportProto{{ContainerId: testContainerID(1)}}}, nil
		},
		GetResourceTypeInfo: func(ctx context.Context, _ *yarnpb.GetAllResourceTypeInfoRequestProto) (*yarnpb.GetAllResourceTypeInfoResponseProto, error) {
			f.record(ctx)
			return &yarnpb.GetAllResourceTypeInfoResponseProto{ResourceTypeInfo: []*yarnpb.ResourceTypeInfoProto{
				{Name: proto.String("memory-mb"), Units: proto.String("Mi")}, {Name: proto.String("vcores")},
			}}, nil
		},
	}.Methods()
}

func (f *fakeRM) record(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users = append(f.users, callerUser(ctx))
}

func newTestRM(t *testing.T, f *fakeRM) *RMClient {
	t.Helper()
	addr := ipctest.Serve(t, ipc.Config{Simple: true}, yarnrpc.ApplicationClientProtocolName, f.methods()...)
	c, err := NewRMClient(addr, RMConfig{User: "alice", PollInterval: time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRMClientSubmitApplication(t *testing.T) {
	const (
		notFound  = yarnpb.YarnApplicationStateProto(0)
		saving    = yarnpb.YarnApplicationStateProto_NEW_SAVING
		submitted = yarnpb.YarnApplicationStateProto_SUBMITTED
		accepted  = yarnpb.YarnApplicationStateProto_ACCEPTED
		running   = yarnpb.YarnApplicationStateProto_RUNNING
		failed    = yarnpb.YarnApplicationStateProto_FAILED
		killed    = yarnpb.YarnApplicationStateProto_KILLED
	)
	tests := []struct {
		name            string
		states          []yarnpb.YarnApplicationStateProto
		wantErr         string
		wantReports     int
		wantSubmissions int
	}{
		{"waits until the application leaves SUBMITTED", []yarnpb.YarnApplicationStateProto{saving, submitted, submitted, accepted}, "", 4, 1},
		{"returns at once for an application already running", []yarnpb.YarnApplicationStateProto{running}, "", 1, 1},
		{"fails when the application ends FAILED", []yarnpb.YarnApplicationStateProto{submitted, failed}, "Failed to submit application_1700000000000_0001 to YARN : queue is stopped", 2, 1},
		{"fails when the application is KILLED", []yarnpb.YarnApplicationStateProto{killed}, "Failed to submit", 1, 1},
		{"submits again when the RM lost the application", []yarnpb.YarnApplicationStateProto{notFound, accepted}, "", 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeRM{states: tt.states}
			c := newTestRM(t, f)
			err := c.SubmitApplication(testCtx(t), &yarnpb.ApplicationSubmissionContextProto{ApplicationId: testApp.Proto()})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("submit: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("submit: %v, want an error with %q", err, tt.wantErr)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.reports != tt.wantReports || f.submissions != tt.wantSubmissions {
				t.Errorf("reports %d, submissions %d; want %d and %d", f.reports, f.submissions, tt.wantReports, tt.wantSubmissions)
			}
			for _, u := range f.users {
				if u != "alice" {
					t.Errorf("call by %q, want alice", u)
				}
			}
		})
	}
}

func TestRMClientKillApplication(t *testing.T) {
	tests := []struct {
		name        string
		killsNeeded int
	}{
		{"one call when the kill completes at once", 1},
		{"repeats until the kill is complete", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeRM{killsNeeded: tt.killsNeeded}
			c := newTestRM(t, f)
			if err := c.KillApplication(testCtx(t), testApp.Proto(), "by test"); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.kills != tt.killsNeeded {
				t.Errorf("kill called %d times, want %d", f.kills, tt.killsNeeded)
			}
		})
	}
}

func TestRMClientQueries(t *testing.T) {
	c := newTestRM(t, &fakeRM{})
	tests := []struct {
		name  string
		query func(ctx context.Context) (int, error)
		want  int
	}{
		{"new application carries the id and maximum capability", func(ctx context.Context) (int, error) {
			r, err := c.GetNewApplication(ctx)
			return int(r.GetApplicationId().GetId() + int32(r.GetMaximumCapability().GetMemory())), err
		}, 1 + 8192},
		{"attempts of an application", func(ctx context.Context) (int, error) {
			r, err := c.GetApplicationAttempts(ctx, testApp.Proto())
			return len(r), err
		}, 1},
		{"containers of an attempt", func(ctx context.Context) (int, error) {
			r, err := c.GetContainers(ctx, &yarnpb.ApplicationAttemptIdProto{ApplicationId: testApp.Proto(), AttemptId: proto.Int32(1)})
			return len(r), err
		}, 1},
		{"resource types of the cluster", func(ctx context.Context) (int, error) {
			r, err := c.GetResourceTypeInfo(ctx)
			return len(r), err
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.query(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}
