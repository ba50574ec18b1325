package ha

import (
	"context"
	"fmt"

	"github.com/knitdev/knit/protocols/commonrpc"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
)

// Admission refuses RPCs with StandbyException while its replica is not the
// active RM. HAServiceProtocol is always admitted: it is how a client finds
// out which RM is active.
type Admission struct {
	// ID is this RM's id (yarn.resourcemanager.ha.id), named in the answer.
	ID string
	// Active reports whether this replica may answer; nil means never (a
	// standby's servers).
	Active func() bool
}

// Err is the StandbyException a standby answers with, in AdminService's
// words.
func (a Admission) Err() error {
	return yarnerr.Standby.New(fmt.Sprintf("ResourceManager %s is not Active!", a.ID))
}

func (a Admission) active() bool { return a.Active != nil && a.Active() }

// AdmitCall is ipc.Config.AdmitCall.
func (a Admission) AdmitCall(_ context.Context, protocol, _ string) error {
	if protocol == commonrpc.HAServiceProtocolName || a.active() {
		return nil
	}
	return a.Err()
}

// Tokens wraps the SecretLookup of a token port so that a standby refuses
// the SASL exchange itself with StandbyException, before any call: an AM or
// a node relay then fails over as on any other call. next may be nil on a
// standby, which has no token keys.
func (a Admission) Tokens(next ipc.SecretLookup) ipc.SecretLookup {
	return func(ctx context.Context, identifier []byte) (ipc.Secret, error) {
		if !a.active() || next == nil {
			return ipc.Secret{}, a.Err()
		}
		return next(ctx, identifier)
	}
}
