package yarnerr

import "strings"

// alreadyRegistered is the part of the RM's refusal of a second register
// of an attempt (AMRMClientUtils.APP_ALREADY_REGISTERED_MESSAGE).
const alreadyRegistered = "Application Master is already registered : "

// AlreadyRegistered is the RM's InvalidApplicationMasterRequestException
// for a register of an attempt that registered already.
func AlreadyRegistered(app string) *Error {
	return InvalidApplicationMasterRequest.New(alreadyRegistered + app)
}

// IsAlreadyRegistered reports whether err is the RM's refusal of a second
// register, which YARN's relayers take for a success: the attempt is the
// caller's, registered by an earlier call of its own.
func IsAlreadyRegistered(err error) bool {
	e, ok := Find(err)
	return ok && e.Class == InvalidApplicationMasterRequest && strings.Contains(e.Message, alreadyRegistered)
}
