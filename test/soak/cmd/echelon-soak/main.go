// Command echelon-soak runs the soak (`make soak`): randomized rollouts on
// several RolloutGroups at once, on a local control plane, with two
// leader-elected operators, while the pod monitor judges every pod event;
// then it prints the table. It exits 1 when a guarantee was breached or a
// rollout did not end as its script expects.
//
// The seed is printed first; --seed reproduces a run's scripts (the
// schedule is a function of the seed; the cluster's timing is not).
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/internal/operator"
	"github.com/echelon-operator/echelon/test/controlplane"
	"github.com/echelon-operator/echelon/test/soak"
)

func main() {
	var opts soak.Options
	flag.Uint64Var(&opts.Seed, "seed", 0, "seed of the scripts; 0 draws one (printed first)")
	flag.IntVar(&opts.Rollouts, "rollouts", 24, "rollouts in all, shared out among the groups")
	flag.IntVar(&opts.Groups, "groups", 4, "RolloutGroups rolled at the same time")
	replicas := flag.Int("replicas", 4, "pods per zone at the start (three zones per group)")
	flag.IntVar(&opts.APIServerRestarts, "apiserver-restarts", 1, "kube-apiserver restarts, at moments the seed draws")
	flag.BoolVar(&opts.Handovers, "handovers", true, "hand over between the two operators (SIGKILL or SIGTERM) in about a third of the rollouts")
	flag.BoolVar(&opts.Evictions, "evictions", true, "evict a pod of the group in about a third of the rollouts, through the Eviction API and the eviction webhook")
	flag.BoolVar(&opts.Drains, "drains", true, "drain a node (cordon, evict every soak pod on it, uncordon) in about one rollout in twelve; with --evictions")
	flag.BoolVar(&opts.Throttle, "throttle", true, "put the operator's API requests in a priority level low enough that some are answered 429")
	flag.DurationVar(&opts.RolloutTimeout, "rollout-timeout", 3*time.Minute, "how long a rollout may take to reach its outcome before it counts as stuck")
	flag.Parse()
	opts.Replicas = int32(*replicas)
	if opts.Seed == 0 {
		opts.Seed = rand.Uint64() >> 1
	}
	fmt.Printf("soak seed %d (reproduce the scripts with --seed=%d)\n", opts.Seed, opts.Seed)
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run(opts soak.Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "echelon-soak-")
	if err != nil {
		return err
	}
	bin, err := framework.BuildOperator(root, dir)
	if err != nil {
		return err
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{Nodes: 6, CRDDirs: []string{controlplane.CRDBasesDir}, Scheme: operator.NewScheme()})
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	user, err := cp.NewOperatorUser(ctx, "echelon-operator")
	if err != nil {
		return err
	}
	rep, err := soak.Run(ctx, soak.Env{ControlPlane: cp, OperatorBin: bin, OperatorUser: user, LogDir: dir, Log: os.Stdout}, opts)
	if rep != nil {
		fmt.Println()
		rep.Print(os.Stdout)
		fmt.Printf("operator logs: %s\n", dir)
	}
	if err != nil {
		return err
	}
	if rep.Failed() {
		return fmt.Errorf("seed %d: %d breaches, %d rollouts not as expected", opts.Seed, len(rep.Breaches), len(rep.Problems()))
	}
	return nil
}
