package yarnerr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/knitdev/knit/protocols/ipc"
)

func TestInvalidResponseIDReadsAsTheRMWritesItAndGivesBackTheExpectedID(t *testing.T) {
	err := InvalidResponseID("appattempt_1_0001_000001", 7, 0)
	const want = "org.apache.hadoop.yarn.exceptions.InvalidApplicationMasterRequestException: Invalid responseId in AllocateRequest from application attempt: appattempt_1_0001_000001, expect responseId to be 7, but get 0"
	if err.Error() != want {
		t.Errorf("message:\n got %s\nwant %s", err.Error(), want)
	}
	tests := []struct {
		name   string
		err    error
		want   int32
		wantOK bool
	}{
		{"the RM's refusal", err, 7, true},
		{"wrapped", fmt.Errorf("client: allocate: %w", err), 7, true},
		{"as it comes off the wire", FromRemote(&ipc.RemoteError{ClassName: string(InvalidApplicationMasterRequest), Message: err.Message}), 7, true},
		{"another class with the same words", YarnException.New(err.Message), 0, false},
		{"another refusal of the class", InvalidApplicationMasterRequest.New("Application Master is already registered : x"), 0, false},
		{"a number that is not one", InvalidApplicationMasterRequest.New("x, expect responseId to be seven, but get 0"), 0, false},
		{"a negative number", InvalidApplicationMasterRequest.New("x, expect responseId to be -1, but get 0"), 0, false},
		{"the parts out of order", InvalidApplicationMasterRequest.New("x, but get 0, expect responseId to be 3"), 0, false},
		{"not an exception", errors.New("connection reset"), 0, false},
		{"nil", nil, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ExpectedResponseID(tc.err)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("ExpectedResponseID = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func FuzzExpectedResponseID(f *testing.F) {
	f.Add("Invalid responseId in AllocateRequest from application attempt: a, expect responseId to be 7, but get 0")
	f.Add(", expect responseId to be , but get ")
	f.Fuzz(func(t *testing.T, msg string) {
		if id, ok := ExpectedResponseID(InvalidApplicationMasterRequest.New(msg)); ok && id < 0 {
			t.Fatalf("negative id %d from %q", id, msg)
		}
	})
}
