package yarnerr

import (
	"fmt"
	"testing"

	"github.com/knitdev/knit/protocols/ipc"
)

func TestIsAlreadyRegisteredKnowsTheRMsRefusalOfASecondRegister(t *testing.T) {
	err := AlreadyRegistered("application_1_0001")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"the RM's refusal", err, true},
		{"wrapped", fmt.Errorf("client: register application master: %w", err), true},
		{"as it comes off the wire", FromRemote(&ipc.RemoteError{ClassName: string(InvalidApplicationMasterRequest), Message: err.Message}), true},
		{"another class with the same words", YarnException.New(err.Message), false},
		{"another refusal of the class", InvalidResponseID("appattempt_1_0001_000001", 7, 0), false},
		{"no error", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsAlreadyRegistered(tt.err); got != tt.want {
				t.Errorf("IsAlreadyRegistered(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
