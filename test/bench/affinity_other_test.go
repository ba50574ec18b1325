//go:build !linux

package bench

import "errors"

var errNoAffinity = errors.New("CPU affinity is set only on Linux")

func pinProcess(...int) error { return errNoAffinity }

func allowedCPUs() ([]int, error) { return nil, errNoAffinity }
