//go:build unix

package bench

import (
	"fmt"
	"syscall"
)

// ensureFDs makes sure the process may hold need open file descriptors,
// raising the soft RLIMIT_NOFILE (never the hard one, which needs privilege)
// when it is lower. It fails only if the hard limit is too low.
func ensureFDs(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("getrlimit: %w", err)
	}
	if lim.Cur >= need {
		return nil
	}
	if lim.Max < need {
		return fmt.Errorf("need %d file descriptors, hard limit is %d (raise it with ulimit -Hn)", need, lim.Max)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("setrlimit to %d: %w", lim.Max, err)
	}
	return nil
}
