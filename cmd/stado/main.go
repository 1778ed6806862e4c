// Command stado is a fleet operator's tool: its optimize commands run the
// autonomy reconciler that repairs declared services proven down, within the
// bounds of a policy, an emergency pause, a circuit breaker and a lease per
// service. This package only parses, calls a package and renders.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Getenv)
	stop()
	os.Exit(code)
}
