package yarnerr

import (
	"strconv"
	"strings"
)

// The parts of the RM's refusal of a heartbeat whose response id is not
// the one it expects (AMRMClientUtils.assembleInvalidResponseIdExceptionMessage).
const (
	invalidResponseIDPrefix = "Invalid responseId in AllocateRequest from application attempt: "
	expectedResponseID      = ", expect responseId to be "
	receivedResponseID      = ", but get "
)

// InvalidResponseID is the RM's InvalidApplicationMasterRequestException
// for a heartbeat of attempt numbered received where expected was due.
func InvalidResponseID(attempt string, expected, received int32) *Error {
	return InvalidApplicationMasterRequest.New(invalidResponseIDPrefix + attempt +
		expectedResponseID + strconv.Itoa(int(expected)) + receivedResponseID + strconv.Itoa(int(received)))
}

// ExpectedResponseID reads the response id the RM expected out of its
// refusal of a heartbeat, as YARN's AMRMClientRelayer does
// (AMRMClientUtils.parseExpectedResponseIdFromException) to catch up with
// an RM it lost count with; ok is false for any other error.
func ExpectedResponseID(err error) (id int32, ok bool) {
	e, found := Find(err)
	if !found || e.Class != InvalidApplicationMasterRequest {
		return 0, false
	}
	msg := e.Message
	start := strings.Index(msg, expectedResponseID)
	end := strings.Index(msg, receivedResponseID)
	if start < 0 || end < start {
		return 0, false
	}
	n, err := strconv.ParseInt(msg[start+len(expectedResponseID):end], 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}
