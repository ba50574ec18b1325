// Command sparkjob is a Spark-shaped YARN application: a job of two stages
// that shuffles through the node's spark_shuffle service as Spark on YARN
// does with spark.shuffle.service.enabled and spark.authenticate.
// "sparkjob -executors N" submits it; "sparkjob am" and "sparkjob
// executor" are its containers' roles. The logic lives in package sparkapp.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/knitdev/knit/examples/sparkjob/sparkapp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := sparkapp.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
