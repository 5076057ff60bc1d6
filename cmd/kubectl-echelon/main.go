// Command kubectl-echelon is the kubectl plugin of Echelon: `kubectl echelon
// get rg NAME --watch`, `plan`, and the rollout controls. See
// docs/kubectl-plugin.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/echelon-operator/echelon/internal/cli"
)

// version is set at link time from `git describe` (make kubectl-echelon).
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := cli.NewCommand(streams, version).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error: "+cli.OneLine(err))
		os.Exit(1)
	}
}
