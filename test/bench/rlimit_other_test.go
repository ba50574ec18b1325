//go:build !unix

package bench

// ensureFDs has nothing to raise where there is no RLIMIT_NOFILE.
func ensureFDs(uint64) error { return nil }
