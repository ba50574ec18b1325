// Command mrjob is a MapReduce-shaped YARN application: Hadoop's WordCount
// with its own Go application master, map and reduce tasks, shuffling
// through the node's mapreduce_shuffle service as MapReduce does.
// "mrjob -input FILES -output DIR -reduces N" submits it; "mrjob am",
// "mrjob map" and "mrjob reduce" are its containers' roles. The logic lives
// in package wordcount, the wire formats in package mapred.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/knitdev/knit/examples/mrjob/wordcount"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := wordcount.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
