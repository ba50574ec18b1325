package amrmproxy

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// Interceptor is one stage of an attempt's pipeline (YARN's
// RequestInterceptor): it answers the AM's calls, usually by passing them,
// changed or not, to the next stage. The Service makes one call at a time
// per pipeline. The AM-facing response ids and tokens are the Service's:
// an interceptor's answer id and am_rm_token are replaced.
type Interceptor interface {
	yarnrpc.ApplicationMasterProtocolServer
	// Close releases what the stage holds once the pipeline ends (the
	// Service closes every stage, so Close does not close the next one).
	// It is called once, even when a later stage failed to build.
	Close() error
}

// Ender is a stage with work to do when its pipeline ends before the AM
// finished, because the application ended in the RM (killed, failed): the
// federation interceptor kills its unmanaged AMs. End runs before Close,
// once; its error is logged, and the pipeline ends all the same.
type Ender interface {
	End(ctx context.Context) error
}

// App is what a pipeline's stages know of the attempt they serve.
type App struct {
	Attempt yarnid.AttemptID
	// User is the application's submitter.
	User string
	// RMToken is the attempt's real AMRMToken as the RM launched the AM
	// with it; the stage that talks to the RM keeps its renewals.
	RMToken token.Token
	// Logger is keyed by the attempt.
	Logger *slog.Logger
	// Kept is what the stages kept with Keep in the node's earlier life,
	// by key: empty for a new pipeline, read by a Resumer.
	Kept map[string][]byte
	// Keep puts a stage's entry, under a key of its own, in the attempt's
	// state, to be in Kept after a restart of the node; a nil value drops
	// the entry. It is safe for concurrent use (a stage's goroutines keep
	// what they learn), the entries go once the pipeline ends, and a
	// failure is logged: only a restart would lose the entry. Nil keeps
	// nothing.
	Keep func(key string, value []byte)
}

// keep is Keep, when the pipeline has a state.
func (a App) keep(key string, value []byte) {
	if a.Keep != nil {
		a.Keep(key, value)
	}
}

// Stage builds one interceptor of a pipeline in front of next, which is
// nil for the last stage.
type Stage func(app App, next Interceptor) (Interceptor, error)

// Names of the interceptors yarn.nodemanager.amrmproxy.interceptor-class.pipeline
// lists, YARN's class names, so a NodeManager's yarn-site.xml reads the same.
const (
	// DefaultInterceptorName forwards to the home RM; it must be last.
	DefaultInterceptorName = "org.apache.hadoop.yarn.server.nodemanager.amrmproxy.DefaultRequestInterceptor"
)

// build makes a pipeline's stages from the last to the first, and returns
// them first to last. When a stage fails, the ones built are closed.
func build(app App, names []string, stages map[string]Stage) ([]Interceptor, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("amrmproxy: empty interceptor pipeline")
	}
	out := make([]Interceptor, len(names))
	var next Interceptor
	for i := len(names) - 1; i >= 0; i-- {
		stage, ok := stages[names[i]]
		if !ok {
			closeAll(out[i+1:])
			return nil, fmt.Errorf("amrmproxy: interceptor %q is not one knit-node has", names[i])
		}
		ic, err := stage(app, next)
		if err != nil {
			closeAll(out[i+1:])
			return nil, fmt.Errorf("amrmproxy: interceptor %s: %w", names[i], err)
		}
		out[i], next = ic, ic
	}
	return out, nil
}

// closeAll closes every stage, first to last, and returns the first error.
func closeAll(stages []Interceptor) error {
	var first error
	for _, ic := range stages {
		if err := ic.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
