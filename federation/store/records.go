package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrNotFound is wrapped by the errors of calls that name a sub-cluster or
// an application the store does not hold; YARN's stores throw a
// FederationStateStoreException for the same calls.
var ErrNotFound = errors.New("not found")

// ErrConflict is wrapped by the errors of writes over a version of a record
// that is no longer the stored one: another writer came first.
var ErrConflict = errors.New("conflict")

// State is a sub-cluster's state (YARN's SubClusterState, numbered as
// SubClusterStateProto).
type State int

const (
	StateNew State = iota + 1
	StateRunning
	StateUnhealthy
	StateDecommissioning
	StateLost
	StateUnregistered
	StateDecommissioned
)

var stateNames = [...]string{
	StateNew:             "SC_NEW",
	StateRunning:         "SC_RUNNING",
	StateUnhealthy:       "SC_UNHEALTHY",
	StateDecommissioning: "SC_DECOMMISSIONING",
	StateLost:            "SC_LOST",
	StateUnregistered:    "SC_UNREGISTERED",
	StateDecommissioned:  "SC_DECOMMISSIONED",
}

// String is the state's name in YARN ("SC_RUNNING").
func (s State) String() string {
	if s < StateNew || s > StateDecommissioned {
		return fmt.Sprintf("State(%d)", int(s))
	}
	return stateNames[s]
}

// ParseState reads a state's YARN name.
func ParseState(name string) (State, error) {
	for s := StateNew; s <= StateDecommissioned; s++ {
		if stateNames[s] == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("unknown sub-cluster state %q", name)
}

// Active reports whether the sub-cluster takes work: SC_RUNNING only, as
// SubClusterState.isActive.
func (s State) Active() bool { return s == StateRunning }

// SubClusterInfo is one sub-cluster as the store holds it (YARN's
// SubClusterInfo).
type SubClusterInfo struct {
	// ID is the sub-cluster id: its RMs' yarn.resourcemanager.cluster-id.
	ID string
	// The addresses (host:port) of the sub-cluster's RM services.
	AMRMServiceAddress     string
	ClientRMServiceAddress string
	RMAdminServiceAddress  string
	RMWebServiceAddress    string
	// LastHeartBeat is when the store last heard from the sub-cluster, by
	// the writer's clock; set by the store on register and heartbeat.
	LastHeartBeat time.Time
	State         State
	// LastStartTime is when the sub-cluster's RM started (its cluster
	// timestamp in YARN).
	LastStartTime time.Time
	// Capability is the RM's cluster metrics as the JSON YARN's heartbeat
	// writes ({"clusterMetrics":{...}}); empty before the first heartbeat.
	Capability string
}

// ApplicationHome is the sub-cluster an application was submitted to.
type ApplicationHome struct {
	// Application is the application id's string form.
	Application string
	// Home is the sub-cluster id.
	Home string
	// CreateTime is when the home was first recorded, by the store's
	// clock; set by the store, ignored on writes.
	CreateTime time.Time
}

// PolicyConfiguration is a queue's federation policy (YARN's
// SubClusterPolicyConfiguration).
type PolicyConfiguration struct {
	// Queue is the queue name; "*" is the policy of every queue without one
	// of its own (YarnConfiguration.DEFAULT_FEDERATION_POLICY_KEY).
	Queue string
	// Type is the policy manager's Java class name, which picks the router
	// and AMRMProxy policies.
	Type string
	// Params is the policy's serialized parameters: the JSON of
	// WeightedPolicyInfo for the weighted policies.
	Params []byte
}

// Membership is YARN's FederationMembershipStateStore.
type Membership interface {
	// RegisterSubCluster stores info, replacing what the store held for its
	// id, with LastHeartBeat the store's now.
	RegisterSubCluster(ctx context.Context, info SubClusterInfo) error
	// SubClusterHeartbeat sets a registered sub-cluster's state and
	// capability and its LastHeartBeat to now; ErrNotFound if the id is
	// not registered.
	SubClusterHeartbeat(ctx context.Context, id string, state State, capability string) error
	// DeregisterSubCluster sets a registered sub-cluster's state (one of
	// the inactive ones); ErrNotFound if the id is not registered.
	DeregisterSubCluster(ctx context.Context, id string, state State) error
	// GetSubCluster returns the sub-cluster; ErrNotFound if unknown.
	GetSubCluster(ctx context.Context, id string) (SubClusterInfo, error)
	// GetSubClusters returns every sub-cluster, or only the active ones
	// when filterInactive, sorted by id.
	GetSubClusters(ctx context.Context, filterInactive bool) ([]SubClusterInfo, error)
}

// ApplicationHomes is YARN's FederationApplicationHomeSubClusterStore.
type ApplicationHomes interface {
	// AddApplicationHomeSubCluster records home as the application's home
	// unless it has one, and returns the home the store holds: a re-added
	// application keeps its first home.
	AddApplicationHomeSubCluster(ctx context.Context, h ApplicationHome) (string, error)
	// UpdateApplicationHomeSubCluster moves a recorded application to a
	// new home; ErrNotFound if it has none.
	UpdateApplicationHomeSubCluster(ctx context.Context, h ApplicationHome) error
	// GetApplicationHomeSubCluster returns the application's home;
	// ErrNotFound if it has none.
	GetApplicationHomeSubCluster(ctx context.Context, application string) (string, error)
	// GetApplicationsHomeSubCluster returns the recorded homes, sorted by
	// application: those in home, or all when home is empty.
	GetApplicationsHomeSubCluster(ctx context.Context, home string) ([]ApplicationHome, error)
	// DeleteApplicationHomeSubCluster forgets the application's home;
	// ErrNotFound if it has none.
	DeleteApplicationHomeSubCluster(ctx context.Context, application string) error
}

// ReservationHome is a reservation's home sub-cluster (YARN's
// ReservationHomeSubCluster).
type ReservationHome struct {
	// Reservation is the reservation id's string form.
	Reservation string
	// Home is the sub-cluster id.
	Home string
}

// ReservationHomes is YARN's FederationReservationHomeSubClusterStore.
type ReservationHomes interface {
	// AddReservationHomeSubCluster records home as the reservation's home
	// unless it has one, and returns the home the store holds.
	AddReservationHomeSubCluster(ctx context.Context, h ReservationHome) (string, error)
	// UpdateReservationHomeSubCluster moves a recorded reservation to a
	// new home; ErrNotFound if it has none.
	UpdateReservationHomeSubCluster(ctx context.Context, h ReservationHome) error
	// GetReservationHomeSubCluster returns the reservation's home;
	// ErrNotFound if it has none.
	GetReservationHomeSubCluster(ctx context.Context, reservation string) (string, error)
	// DeleteReservationHomeSubCluster forgets the reservation's home;
	// ErrNotFound if it has none.
	DeleteReservationHomeSubCluster(ctx context.Context, reservation string) error
}

// Policies is YARN's FederationPolicyStore.
type Policies interface {
	// GetPolicyConfiguration returns the queue's policy; ErrNotFound if it
	// has none.
	GetPolicyConfiguration(ctx context.Context, queue string) (PolicyConfiguration, error)
	// SetPolicyConfiguration stores the queue's policy, replacing any.
	SetPolicyConfiguration(ctx context.Context, p PolicyConfiguration) error
	// GetPoliciesConfigurations returns every queue's policy, sorted by
	// queue.
	GetPoliciesConfigurations(ctx context.Context) ([]PolicyConfiguration, error)
	// DeletePoliciesConfigurations forgets the policies of queues; a queue
	// without one is no error.
	DeletePoliciesConfigurations(ctx context.Context, queues []string) error
}

// RouterKeys keeps the state of the Routers' delegation token secret
// manager: what YARN's FederationStateStore keeps as RouterMasterKey and
// RouterStoreToken records with its token sequence number and current key
// id (storeNewMasterKey, removeStoredMasterKey, storeNewToken,
// updateStoredToken, removeStoredToken, getTokenByRouterStoreToken,
// incrementDelegationTokenSeqNum). The master keys, current key id and
// sequence number are one record, read and replaced whole under its
// version, so that every Router of the federation issues on the same keys
// and the sequence numbers never repeat; each live token is a record of
// its own, by sequence number, as YARN's ZooKeeper and SQL stores keep a
// row per token, so that the number of live tokens is bounded by no one
// object's size. Every write names the version it replaces and fails with
// ErrConflict when another Router wrote first.
type RouterKeys interface {
	// GetRouterKeys returns the stored keys record and its version; no
	// bytes and an empty version when nothing is stored yet.
	GetRouterKeys(ctx context.Context) (data []byte, version string, err error)
	// PutRouterKeys replaces the keys record stored under version (empty:
	// none stored yet) and returns the new version; ErrConflict, wrapped,
	// when the stored version is another.
	PutRouterKeys(ctx context.Context, data []byte, version string) (string, error)
	// GetRouterTokens returns every stored token record, sorted by
	// sequence number.
	GetRouterTokens(ctx context.Context) ([]RouterToken, error)
	// PutRouterToken replaces the record of token t.SequenceNumber stored
	// under t.Version (empty: none stored yet) with t.Data and returns the
	// new version; ErrConflict, wrapped, when the stored version is
	// another or, for a replacement, none is stored.
	PutRouterToken(ctx context.Context, t RouterToken) (string, error)
	// DeleteRouterToken deletes the record of token seq stored under
	// version; ErrConflict, wrapped, when another version is stored. None
	// stored is no error: the token is gone, as the delete wanted, and a
	// retried delete whose first answer was lost finds it so.
	DeleteRouterToken(ctx context.Context, seq int32, version string) error
}

// RouterToken is the record of one live delegation token of the Routers.
type RouterToken struct {
	// SequenceNumber is the token's, its key in the store.
	SequenceNumber int32
	// Data is the token as the Routers keep it (its identifier and renew
	// date), at most MaxRouterToken bytes.
	Data []byte
	// Version is the stored version the record was read at, or, given to
	// PutRouterToken, the version it replaces.
	Version string
}

// MaxRouterToken bounds a token record: a token's identifier and renew
// date take a few hundred bytes.
const MaxRouterToken = 16 << 10

// ClusterTimestamps keeps which sub-cluster holds which cluster
// timestamp. An application id is its RM's cluster timestamp and a
// sequence number, and the Router finds an application's home by that id
// alone: two sub-clusters under one timestamp would hand out the same ids.
// YARN leaves it to chance (the timestamp is an RM's start time, in
// milliseconds); a Knit RM claims its timestamp here before it hands out
// any id (and so does a knit-router, under a claimant id of its own, for
// the ids it hands out itself), and a claim, once made, is never given to
// another sub-cluster:
// the ids of a sub-cluster gone LOST or deregistered live on in the
// homes, reports and logs of its applications.
type ClusterTimestamps interface {
	// ClaimClusterTimestamp records ts as sub-cluster id's cluster
	// timestamp unless a sub-cluster holds it already, and returns the
	// holder: id when the claim is id's (made now or before), another
	// sub-cluster's id when ts is taken. Of claims of one ts made at once,
	// exactly one holds.
	ClaimClusterTimestamp(ctx context.Context, ts int64, id string) (holder string, err error)
}

// StateStore is the whole store.
type StateStore interface {
	Membership
	ClusterTimestamps
	ApplicationHomes
	ReservationHomes
	Policies
	RouterKeys
}

// validateInfo checks what registerSubCluster requires
// (FederationMembershipStateStoreInputValidator).
func validateInfo(info SubClusterInfo) error {
	var errs []error
	if info.ID == "" {
		errs = append(errs, errors.New("missing SubCluster Id"))
	}
	for _, a := range []struct{ name, addr string }{
		{"AMRMService", info.AMRMServiceAddress},
		{"ClientRMService", info.ClientRMServiceAddress},
		{"RMAdminService", info.RMAdminServiceAddress},
		{"RMWebService", info.RMWebServiceAddress},
	} {
		if a.addr == "" {
			errs = append(errs, fmt.Errorf("missing %s address", a.name))
		}
	}
	if err := validateState(info.State); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateClaim checks a claim of a cluster timestamp.
func validateClaim(ts int64, id string) error {
	if ts <= 0 || id == "" {
		return fmt.Errorf("federation store: claim of cluster timestamp %d by %q: needs a positive timestamp and a sub-cluster id", ts, id)
	}
	return nil
}

// validateState checks a state given to a heartbeat or a deregistration.
func validateState(state State) error {
	if state < StateNew || state > StateDecommissioned {
		return fmt.Errorf("invalid SubCluster State %v", state)
	}
	return nil
}

// ClusterMetrics are the figures of a sub-cluster's capability that the
// federation's policies weigh it by: the router's LoadBasedRouterPolicy
// (available memory) and the GPG's LoadBasedGlobalPolicy (pending
// applications).
type ClusterMetrics struct {
	AvailableMB int64
	AppsPending int
}

// ParseCapability reads the clusterMetrics of a capability as YARN's
// heartbeat writes it ({"clusterMetrics":{"availableMB":…,"appsPending":…,…}});
// a capability without them (a sub-cluster that never heartbeat) is an
// error.
func ParseCapability(capability string) (ClusterMetrics, error) {
	var c struct {
		ClusterMetrics *struct {
			AvailableMB *int64 `json:"availableMB"`
			AppsPending *int   `json:"appsPending"`
		} `json:"clusterMetrics"`
	}
	if err := json.Unmarshal([]byte(capability), &c); err != nil {
		return ClusterMetrics{}, fmt.Errorf("capability: %w", err)
	}
	m := c.ClusterMetrics
	if m == nil || m.AvailableMB == nil || m.AppsPending == nil {
		return ClusterMetrics{}, fmt.Errorf("capability %q lacks clusterMetrics.availableMB or appsPending", capability)
	}
	return ClusterMetrics{AvailableMB: *m.AvailableMB, AppsPending: *m.AppsPending}, nil
}
