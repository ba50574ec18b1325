package yarnapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"google.golang.org/protobuf/proto"
)

// AMEnv is where an example ApplicationMaster runs: what its container's
// environment and command line tell it.
type AMEnv struct {
	// SchedulerAddress is the RM's scheduler service.
	SchedulerAddress string
	// ContainerID is the AM's container id ($CONTAINER_ID).
	ContainerID string
	// TokenFile is the AM's credentials ($HADOOP_TOKEN_FILE_LOCATION).
	TokenFile string
	// Host is the host the AM registers; empty means this host's name.
	Host string
	// HeartbeatInterval paces allocate; zero means a second.
	HeartbeatInterval time.Duration
	// Logger receives progress; nil means slog.Default().
	Logger *slog.Logger
}

// FromContainer fills the container's part of e from its environment, and
// the scheduler address from $HADOOP_CONF_DIR when the command line gave
// none.
func (e *AMEnv) FromContainer(getenv func(string) string) error {
	addr, err := SchedulerAddress(getenv("HADOOP_CONF_DIR"), e.SchedulerAddress)
	if err != nil {
		return err
	}
	e.SchedulerAddress = addr
	e.ContainerID, e.TokenFile = getenv("CONTAINER_ID"), getenv("HADOOP_TOKEN_FILE_LOCATION")
	return nil
}

// WithDefaults returns e with a logger and a heartbeat interval.
func (e AMEnv) WithDefaults() AMEnv {
	if e.Logger == nil {
		e.Logger = slog.Default()
	}
	if e.HeartbeatInterval <= 0 {
		e.HeartbeatInterval = time.Second
	}
	return e
}

// AM is a registered ApplicationMaster with its clients.
type AM struct {
	// Container is the AM's own container.
	Container yarnid.ContainerID
	// Credentials are the AM's, read from its token file.
	Credentials *token.Credentials
	RM          *client.AMRMClient
	NM          *client.NMClient
	// MaxCapability is the largest container the RM grants.
	MaxCapability *yarnpb.ResourceProto
}

// RegisterAM reads the AM's credentials, connects to the scheduler with
// its AMRMToken and registers, as every AM starts. Close releases the
// clients.
func RegisterAM(ctx context.Context, e AMEnv) (*AM, error) {
	e = e.WithDefaults()
	cid, err := yarnid.ParseContainerID(e.ContainerID)
	if err != nil {
		return nil, fmt.Errorf("container id: %w", err)
	}
	if e.TokenFile == "" {
		return nil, errors.New("no credentials file (HADOOP_TOKEN_FILE_LOCATION not set)")
	}
	creds, err := client.ReadCredentialsFile(e.TokenFile)
	if err != nil {
		return nil, err
	}
	amrmToken, err := client.AMRMToken(creds)
	if err != nil {
		return nil, err
	}
	host := e.Host
	if host == "" {
		if host, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("host name: %w", err)
		}
	}
	rm, err := client.NewAMRMClient(e.SchedulerAddress, client.AMRMConfig{Token: amrmToken, Logger: e.Logger})
	if err != nil {
		return nil, err
	}
	nm := client.NewNMClient(rm.NMTokens(), client.NMConfig{Logger: e.Logger})
	a := &AM{Container: cid, Credentials: creds, RM: rm, NM: nm}
	reg, err := rm.Register(ctx, host, -1, "")
	if err != nil {
		return nil, errors.Join(err, a.Close())
	}
	a.MaxCapability = reg.GetMaximumCapability()
	return a, nil
}

// Close closes the AM's clients.
func (a *AM) Close() error { return errors.Join(a.NM.Close(), a.RM.Close()) }

// Asks is an AM's ask table, by priority, as the MapReduce AM keeps it:
// a priority's total is sent when it changed since last sent, or when a
// container was allocated at it since (the RM counted its total down, so a
// task that needs a container again after its first one failed must be
// asked for again even if the total reads the same).
type Asks struct {
	sent  map[int32]int
	dirty map[int32]bool
}

// Want returns the ask to send for a priority, or nil when the RM already
// holds that total.
func (t *Asks) Want(priority int32, n int, capability *yarnpb.ResourceProto) *yarnpb.ResourceRequestProto {
	if t.sent == nil {
		t.sent, t.dirty = map[int32]int{}, map[int32]bool{}
	}
	if sent, ok := t.sent[priority]; !t.dirty[priority] && (ok && sent == n || !ok && n == 0) {
		return nil
	}
	t.sent[priority], t.dirty[priority] = n, false
	return &yarnpb.ResourceRequestProto{
		Priority:             &yarnpb.PriorityProto{Priority: proto.Int32(priority)},
		ResourceName:         proto.String("*"),
		Capability:           capability,
		NumContainers:        proto.Int32(int32(n)),
		RelaxLocality:        proto.Bool(true),
		ExecutionTypeRequest: &yarnpb.ExecutionTypeRequestProto{ExecutionType: yarnpb.ExecutionTypeProto_GUARANTEED.Enum()},
	}
}

// Allocated notes a container the RM allocated at its priority.
func (t *Asks) Allocated(c *yarnpb.ContainerProto) {
	if t.dirty == nil {
		t.sent, t.dirty = map[int32]int{}, map[int32]bool{}
	}
	t.dirty[c.GetPriority().GetPriority()] = true
}
