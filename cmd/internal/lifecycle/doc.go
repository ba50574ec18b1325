// Package lifecycle is the one way Knit's binaries run something between fx's
// start and stop: a server on a listening socket (Serve) or a loop until its
// context ends (Background). Both follow fx's own pattern: OnStart does what
// can fail synchronously (listening) and starts one goroutine; OnStop shuts
// the server down or cancels the loop and waits for the goroutine, within
// the stop deadline.
//
// Something that ends on its own while the app runs — a Serve that returns
// an error, a loop that returns — leaves a binary that looks alive but does
// not do its job, so it is logged and the whole app is stopped through
// fx.Shutdowner with exit code 1, for the Deployment or DaemonSet to restart
// it.
//
// Package lifecycle is for cmd/ only: it is where fx is allowed.
package lifecycle
