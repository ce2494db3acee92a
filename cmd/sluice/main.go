// Command sluice runs the Sluice server and its command-line tools.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicemq/sluice/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
	stop()
	os.Exit(code)
}
