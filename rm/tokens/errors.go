package tokens

import (
	"github.com/knitdev/knit/protocols/ipc"
)

// Java exception classes the token checks answer with, besides ipc's
// ClassInvalidToken and ClassAccessControl.
const (
	// ClassYarnException is what a NodeManager throws for an unauthorized
	// container start (an expired container token).
	ClassYarnException = "org.apache.hadoop.yarn.exceptions.YarnException"
	// ClassInvalidContainer is what a NodeManager throws for a container
	// token another ResourceManager (another rmIdentifier) signed.
	ClassInvalidContainer = "org.apache.hadoop.yarn.exceptions.InvalidContainerException"
)

// msgCannotDeserialize is SaslRpcServer.getIdentifier's message for an
// identifier that does not parse.
const msgCannotDeserialize = "Can't de-serialize tokenIdentifier"

func invalidToken(format string, args ...any) error {
	return ipc.Errorf(ipc.ClassInvalidToken, format, args...)
}

func accessControl(format string, args ...any) error {
	return ipc.Errorf(ipc.ClassAccessControl, format, args...)
}
