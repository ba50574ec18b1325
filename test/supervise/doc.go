// Package supervise keeps a process running as the kubelet keeps a pod's
// container running: when it ends, it is started again, at once the first
// time, then after a back-off of 10 s doubling to 5 min, reset once a run
// has lasted 10 min (CrashLoopBackOff). `knit local` supervises knit-rm, each
// knit-node and the control plane's processes with it; each restart is
// logged and counted in the process's Status.
//
// Backoff is the pure policy (no clock, no goroutine); Process is the shell
// that starts, waits for, restarts and stops one program. Package supervise
// imports only the standard library.
package supervise
