//go:build !unix

package bench

import (
	"errors"
	"time"
)

// processCPU is not measured where there is no getrusage: CPU per call
// reads as 0.
func processCPU() time.Duration { return 0 }

// processCPUOf needs /proc.
func processCPUOf(int) (time.Duration, error) {
	return 0, errors.New("no /proc to read another process's CPU time from")
}
