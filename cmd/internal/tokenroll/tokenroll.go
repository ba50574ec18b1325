// Package tokenroll runs the roll of a token secret manager's keys for the
// binaries that hold one: knit-rm (every family of keys) and knit-router
// (the RM delegation keys it shares with the other Routers).
package tokenroll

import (
	"context"
	"log/slog"
	"time"

	"github.com/knitdev/knit/rm/tokens"
)

// Loop rolls m's keys every interval until ctx ends; a failed roll is
// logged and tried again at the next tick. Run it as a background loop of
// the binary's lifecycle, which owns and stops it.
func Loop(log *slog.Logger, m *tokens.Manager, interval time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case now := <-t.C:
				if err := m.Roll(ctx, now); err != nil {
					log.Error("rolling token keys", "err", err)
				}
			}
		}
	}
}
