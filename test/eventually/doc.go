// Package eventually is the one way Knit's tests wait for something that
// happens elsewhere — a pod to run, a process to exit, a report to change:
// poll a condition until it holds or a deadline passes, and say what was
// last seen when it does not. Tests never sleep a fixed time to wait, and
// never assert on how long something took.
//
// Package eventually imports only the standard library.
package eventually
