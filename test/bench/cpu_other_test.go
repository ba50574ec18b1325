//go:build !unix

package bench

import "time"

// processCPU is not measured where there is no getrusage: CPU per call
// reads as 0.
func processCPU() time.Duration { return 0 }
