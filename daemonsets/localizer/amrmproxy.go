package localizer

import (
	"context"
	"fmt"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
)

// AMRMProxy is the node's AMRMProxy (an *amrmproxy.Service), which AM
// containers reach as their scheduler, as an NM with the AMRMProxy on
// arranges it.
type AMRMProxy interface {
	// TakeAMRMToken starts the attempt's pipeline with the real AMRMToken
	// in creds and puts the proxy's local token in its place; false when
	// creds hold none (and are unchanged).
	TakeAMRMToken(ctx context.Context, attempt yarnid.AttemptID, user string, creds *token.Credentials) (bool, error)
	// EndApplication ends the pipelines of an application that ended in
	// the RM, and what they started elsewhere (a federated AM's unmanaged
	// AMs in other sub-clusters).
	EndApplication(ctx context.Context, app yarnid.ApplicationID)
	// EndAttempt ends an attempt's pipeline once its AM container is gone.
	EndAttempt(attempt yarnid.AttemptID)
}

// envHadoopConfDir is the variable the AM's client finds its scheduler
// address by.
const envHadoopConfDir = "HADOOP_CONF_DIR"

// proxyAM swaps an AM container's AMRMToken for the proxy's local one and
// points its HADOOP_CONF_DIR at the proxy's configuration. Only AM
// containers (the RM set their submit time) go through the proxy; the
// others, and every container when the proxy is off, keep their
// credentials as they are.
func (l *Localizer) proxyAM(ctx context.Context, c launch.Context, attempt yarnid.AttemptID, files *launch.Files, credentials []byte) ([]byte, error) {
	if l.cfg.AMRMProxy == nil || c.AppSubmitTime == 0 || len(credentials) == 0 {
		return credentials, nil
	}
	creds, err := token.ParseCredentials(credentials)
	if err != nil {
		return nil, failf(err, "Cannot read the credentials of %s: %v", c.ContainerID, err)
	}
	swapped, err := l.cfg.AMRMProxy.TakeAMRMToken(ctx, attempt, c.User, creds)
	if err != nil {
		return nil, failf(err, "The AMRMProxy did not take the AMRMToken of %s: %v", c.ContainerID, err)
	}
	if !swapped {
		return credentials, nil
	}
	out, err := creds.Marshal(token.FormatWritable)
	if err != nil {
		return nil, fmt.Errorf("localizer: credentials of %s: %w", c.ContainerID, err)
	}
	if l.cfg.AMConfDir != "" {
		setVar(&files.Whitelist, envHadoopConfDir, l.cfg.AMConfDir)
	}
	return out, nil
}

// setVar sets name in vars, replacing its value if it is there.
func setVar(vars *[]launch.EnvVar, name, value string) {
	for i, v := range *vars {
		if v.Name == name {
			(*vars)[i].Value = value
			return
		}
	}
	*vars = append(*vars, launch.EnvVar{Name: name, Value: value})
}
