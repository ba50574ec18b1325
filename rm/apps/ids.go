package apps

import "github.com/knitdev/knit/protocols/yarnid"

// The id types every event and effect carries, named here so the state
// machines read as YARN's do; their strings and protos live in yarnid.
type (
	// ApplicationID is yarnid.ApplicationID.
	ApplicationID = yarnid.ApplicationID
	// AttemptID is yarnid.AttemptID.
	AttemptID = yarnid.AttemptID
	// ContainerID is yarnid.ContainerID.
	ContainerID = yarnid.ContainerID
)
