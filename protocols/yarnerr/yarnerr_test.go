package yarnerr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
)

func TestErrorsIsMatchesTheClassThroughWrapsAndCauses(t *testing.T) {
	notFound := ApplicationNotFound.Errorf("Application with id '%s' doesn't exist in RM.", "application_1_0001")
	wrapped := fmt.Errorf("report: %w", notFound)
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"the class", notFound, ApplicationNotFound, true},
		{"through a wrap", wrapped, ApplicationNotFound, true},
		{"another class", wrapped, ApplicationAttemptNotFound, false},
		{"another error of the class", wrapped, ApplicationNotFound.New("other"), true},
		{"a wire error of the class", wrapped, &ipc.RemoteError{ClassName: string(ApplicationNotFound)}, true},
		{"the cause of a wrapping exception", YarnException.Wrap(AccessControl.New("denied")), AccessControl, true},
		{"the wrapping exception", YarnException.Wrap(AccessControl.New("denied")), YarnException, true},
		{"a plain error", errors.New("x"), IOException, false},
	}
	for _, tt := range tests {
		if got := errors.Is(tt.err, tt.target); got != tt.want {
			t.Errorf("%s: errors.Is(%v, %v) = %v, want %v", tt.name, tt.err, tt.target, got, tt.want)
		}
	}
}

func TestMessagesReadAsJavaWritesThem(t *testing.T) {
	tests := []struct {
		name      string
		err       *Error
		wantClass Class
		wantMsg   string
	}{
		{"Errorf", InvalidResourceRequest.Errorf("Invalid resource request, number of containers requested is negative: %d", -1),
			InvalidResourceRequest, "Invalid resource request, number of containers requested is negative: -1"},
		{"Wrap of an exception", YarnException.Wrap(AccessControl.New("User bob cannot perform operation MODIFY_APP on x")),
			YarnException, "org.apache.hadoop.security.AccessControlException: User bob cannot perform operation MODIFY_APP on x"},
		{"Wrap of a plain error", YarnException.Wrap(errors.New("unexpected EOF")),
			YarnException, "java.io.IOException: unexpected EOF"},
		{"Wrap of a wrapped exception", YarnException.Wrap(fmt.Errorf("ctx: %w", IOException.New("disk"))),
			YarnException, "java.io.IOException: disk"},
	}
	for _, tt := range tests {
		if tt.err.Class != tt.wantClass || tt.err.JavaMessage() != tt.wantMsg || tt.err.Error() != string(tt.wantClass)+": "+tt.wantMsg {
			t.Errorf("%s: %q / %q, want %q / %q", tt.name, tt.err.Class, tt.err.Message, tt.wantClass, tt.wantMsg)
		}
	}
	cause := errors.New("cause")
	if e := YarnException.Errorf("storing: %w", cause); !errors.Is(e, cause) || e.Message != "storing: cause" {
		t.Errorf("Errorf with %%w: %v, cause kept %v", e, errors.Is(e, cause))
	}
}

func TestSimpleIsJavasGetSimpleName(t *testing.T) {
	for _, tt := range []struct {
		class Class
		want  string
	}{
		{NotFound, "NotFoundException"},
		{QueryParam, "QueryParamException"},
		{"Unqualified", "Unqualified"},
	} {
		if got := tt.class.Simple(); got != tt.want {
			t.Errorf("%s.Simple() = %q, want %q", tt.class, got, tt.want)
		}
	}
}

func TestIsYarnExceptionKnowsYARNsCheckedExceptions(t *testing.T) {
	for _, tt := range []struct {
		class Class
		want  bool
	}{
		{YarnException, true},
		{ApplicationNotFound, true},
		{YARNFeatureNotEnabled, true},
		{YarnRuntime, false},
		{IOException, false},
		{BadRequest, false},
	} {
		if got := tt.class.IsYarnException(); got != tt.want {
			t.Errorf("%s.IsYarnException() = %v, want %v", tt.class, got, tt.want)
		}
	}
}

func TestFindAndClassOf(t *testing.T) {
	wire := &ipc.RemoteError{ClassName: string(Standby), Message: "standby", Code: commonpb.RpcResponseHeaderProto_ERROR_APPLICATION}
	if e, ok := Find(fmt.Errorf("call: %w", wire)); !ok || e.Class != Standby || e.Message != "standby" || !errors.Is(e, wire) {
		t.Errorf("Find(wire) = %v, %v", e, ok)
	}
	if _, ok := Find(errors.New("plain")); ok {
		t.Errorf("Find(plain) found an exception")
	}
	if got := ClassOf(errors.New("plain")); got != IOException {
		t.Errorf("ClassOf(plain) = %s", got)
	}
	if got := ClassOf(fmt.Errorf("x: %w", ContainerNotFound.New("c"))); got != ContainerNotFound {
		t.Errorf("ClassOf = %s", got)
	}
}

func TestFromRemoteGivesTheTypedErrorAndKeepsTheWireError(t *testing.T) {
	re := &ipc.RemoteError{ClassName: string(ApplicationMasterNotRegistered), Message: "AM is not registered",
		Code: commonpb.RpcResponseHeaderProto_ERROR_APPLICATION}
	err := fmt.Errorf("ipc: call allocate: %w", FromRemote(re))
	var e *Error
	if !errors.As(err, &e) || e.Class != ApplicationMasterNotRegistered || e.Message != "AM is not registered" {
		t.Fatalf("errors.As(*Error) = %v", e)
	}
	var got *ipc.RemoteError
	if !errors.As(err, &got) || got != re {
		t.Errorf("the wire error is not kept: %v", got)
	}
	if !errors.Is(err, ApplicationMasterNotRegistered) {
		t.Errorf("errors.Is does not match the class")
	}
}
