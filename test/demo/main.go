/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Command demo runs a three-zone rollout on a local control plane, so that a
// newcomer sees Echelon at work with no cluster: `make demo`, or
//
//	go run ./test/demo [--exit-when-complete]
//
// It starts the test control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok as the kubelets), installs the
// CRDs, runs the echelon binary as a user bound only to the generated RBAC,
// applies config/samples/rolloutgroup-three-zones.yaml, changes the image of the
// three StatefulSets and shows the group roll them out with the real kubectl.
// Then it keeps everything running for the user to explore until Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/internal/operator"
	"github.com/echelon-operator/echelon/test/controlplane"
)

const (
	// sampleFile is the manifest the demo applies, relative to the repository root.
	sampleFile = "config/samples/rolloutgroup-three-zones.yaml"
	// namespace and groupName are those of the sample.
	namespace = "demo"
	groupName = "ingester"
	// oldImage is the sample's image and newImage the one the demo rolls out.
	oldImage = "example.com/ingester:1.0"
	newImage = "example.com/ingester:1.1"
	// fieldOwner names the demo in managedFields.
	fieldOwner = "echelon-demo"
	// operatorUser is the identity the operator runs as.
	operatorUser = "echelon-operator"
	// operatorStopTimeout bounds the operator's clean shutdown.
	operatorStopTimeout = 15 * time.Second
	// totalSteps numbers the steps the demo announces.
	totalSteps = 7
)

type config struct {
	exitWhenComplete bool
	podStartDelay    time.Duration
	podReadyDelay    time.Duration
	timeout          time.Duration
}

func main() {
	var cfg config
	flag.BoolVar(&cfg.exitWhenComplete, "exit-when-complete", false, "Stop everything and exit once the rollout is complete, instead of waiting for Ctrl-C.")
	flag.DurationVar(&cfg.podStartDelay, "pod-start-delay", time.Second, "How long kwok takes from scheduling a pod to giving it an IP.")
	flag.DurationVar(&cfg.podReadyDelay, "pod-ready-delay", time.Second, "How long kwok takes from a pod's IP to the pod being Ready.")
	flag.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "Bound on each wait (pods Ready, rollout complete).")
	flag.Parse()
	// The terminal shows the demo's own lines only: the components and the
	// operator log to files, and the demo's clients have nothing to add.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{cfg: cfg, out: os.Stdout, start: time.Now()}
	err := d.run(ctx)
	d.shutdown()
	switch {
	case err == nil:
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		fmt.Fprintln(d.out, "Interrupted.")
		os.Exit(130)
	default:
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		os.Exit(1)
	}
}

// demo holds what the run started, so that shutdown can stop it in order.
type demo struct {
	cfg   config
	out   io.Writer
	start time.Time

	cp       *controlplane.ControlPlane
	operator *framework.Operator
	tmpDir   string // holds the echelon binary
	kubectl  *kubectl
	watch    *watcher
	steps    int // announced so far
}

// stepPrefix numbers the next step, e.g. "[3/7]".
func (d *demo) stepPrefix() string {
	return fmt.Sprintf("[%d/%d]", d.steps+1, totalSteps)
}

// step announces what it is about to do, does it and says how long it took.
func (d *demo) step(what string, do func() error) error {
	fmt.Fprintf(d.out, "%s %s ... ", d.stepPrefix(), what)
	d.steps++
	began := time.Now()
	if err := do(); err != nil {
		fmt.Fprintf(d.out, "failed (%s)\n", since(began))
		return err
	}
	fmt.Fprintf(d.out, "done (%s)\n", since(began))
	return nil
}

func (d *demo) run(ctx context.Context) error {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "Echelon demo: a RolloutGroup rolls out three zones of 10 pods each, on a local control plane.\n\n")

	err = d.step(fmt.Sprintf("Starting the local control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and kwok as the kubelet of 3 fake nodes (a pod is Ready %s after it is scheduled)",
		d.cfg.podStartDelay+d.cfg.podReadyDelay), func() error {
		d.cp, err = controlplane.Start(ctx, controlplane.Options{
			Nodes:         3,
			PodStartDelay: d.cfg.podStartDelay,
			PodReadyDelay: d.cfg.podReadyDelay,
			Scheme:        operator.NewScheme(),
		})
		return err
	})
	if err != nil {
		return err
	}
	d.kubectl = newKubectl(d.cp)
	fmt.Fprintf(d.out, "      Component logs: %s\n", d.cp.LogDir())

	if err := d.step("Installing the CRDs from config/crd/bases", func() error {
		return installCRDs(d.cp, filepath.Join(root, controlplane.CRDBasesDir))
	}); err != nil {
		return err
	}
	c, err := newClient(d.cp)
	if err != nil {
		return err
	}

	var binary string
	if err := d.step("Building the echelon binary", func() error {
		if d.tmpDir, err = os.MkdirTemp("", "echelon-demo-"); err != nil {
			return err
		}
		binary, err = framework.BuildOperator(root, d.tmpDir)
		return err
	}); err != nil {
		return err
	}

	if err := d.step(fmt.Sprintf("Starting echelon as user %q, bound only to the RBAC in %s", operatorUser, controlplane.OperatorRBACFile), func() error {
		user, err := d.cp.NewOperatorUser(ctx, operatorUser)
		if err != nil {
			return err
		}
		// Its debug log goes next to the components' logs, not to the terminal.
		if d.operator, err = framework.StartOperator(binary, user.Kubeconfig, d.cp.LogDir(), "echelon"); err != nil {
			return err
		}
		waitCtx, cancel := context.WithTimeout(ctx, d.cfg.timeout)
		defer cancel()
		return d.operator.WaitReady(waitCtx)
	}); err != nil {
		return err
	}

	sample, err := os.ReadFile(filepath.Join(root, sampleFile))
	if err != nil {
		return err
	}
	if err := d.step("Applying "+sampleFile+": namespace demo, 3 OnDelete StatefulSets of 10 pods, RolloutGroup ingester (maxUnavailable 2)", func() error {
		return applyManifest(ctx, c, sample)
	}); err != nil {
		return err
	}

	w, err := startWatch(ctx, d.cp, namespace)
	if err != nil {
		return err
	}
	d.watch = w
	if err := d.step("Waiting for the 30 pods to be Ready and the group to be Complete", func() error {
		waitCtx, cancel := context.WithTimeout(ctx, d.cfg.timeout)
		defer cancel()
		return w.waitUntil(waitCtx, w.rolledOutTo(oldImage))
	}); err != nil {
		return d.withOperatorLog(err)
	}
	d.kubectl.show(ctx, d.out, "get", "rolloutgroups", "-n", namespace)

	fmt.Fprintf(d.out, "\n%s Changing the image of the three StatefulSets from %s to %s\n", d.stepPrefix(), oldImage, newImage)
	d.steps++
	changed := time.Now()
	if err := applyManifest(ctx, c, replaceImage(sample, oldImage, newImage)); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "      Echelon replaces at most 2 pods of one zone at a time, a zone only while the others are all Ready.\n")
	fmt.Fprintf(d.out, "      $ kubectl get rolloutgroups -n %s   (on every status change)\n", namespace)
	waitCtx, cancel := context.WithTimeout(ctx, d.cfg.timeout)
	defer cancel()
	if err := followRollout(waitCtx, w, d.kubectl, d.out, changed); err != nil {
		return d.withOperatorLog(err)
	}
	fmt.Fprintf(d.out, "      Rollout complete: 30/30 pods on %s in %s.\n", newImage, since(changed))

	fmt.Fprintln(d.out)
	d.kubectl.show(ctx, d.out, "get", "rg", "-n", namespace, "-o", "wide")
	fmt.Fprintln(d.out)
	d.kubectl.showEvents(ctx, d.out, namespace, "rolloutgroup/"+groupName)

	if d.cfg.exitWhenComplete {
		return nil
	}
	d.printTryIt(root)
	<-ctx.Done()
	fmt.Fprintln(d.out)
	return nil
}

// printTryIt tells the user how to reach the control plane while it runs.
func (d *demo) printTryIt(root string) {
	kubectlDir := filepath.Dir(d.cp.Assets().Kubectl)
	if rel, err := filepath.Rel(root, kubectlDir); err == nil && filepath.IsLocal(rel) {
		kubectlDir = filepath.Join(root, rel)
	}
	fmt.Fprintf(d.out, `
The control plane and the operator keep running until you press Ctrl-C.
Try, in another terminal:

  export KUBECONFIG=%s
  export PATH=%s:%s:$PATH
  kubectl echelon -n demo get rg ingester --watch      # the group as a live tree (docs/kubectl-plugin.md)
  kubectl echelon -n demo plan rg ingester             # which pods the operator deletes next, and why
  kubectl -n demo get rg -o wide --watch               # follow the group
  kubectl -n demo patch rg ingester --type=merge -p '{"spec":{"paused":true}}'
  for z in a b c; do kubectl -n demo set image sts/ingester-zone-$z ingester=example.com/ingester:1.2; done
  kubectl -n demo patch rg ingester --type=merge -p '{"spec":{"paused":false}}'
  kubectl -n demo describe rg ingester

Logs of the operator (echelon.log) and of every component: %s
`, d.cp.Kubeconfig(), filepath.Join(root, "bin"), kubectlDir, d.cp.LogDir())
}

// shutdown stops the operator first, so that it does not log the control
// plane's shutdown as errors, then the control plane.
func (d *demo) shutdown() {
	if d.operator == nil && d.cp == nil && d.tmpDir == "" {
		return
	}
	began := time.Now()
	fmt.Fprint(d.out, "Stopping the operator and the control plane ... ")
	var errs []error
	if d.watch != nil {
		d.watch.Close()
	}
	if d.operator != nil {
		if err := d.operator.Stop(operatorStopTimeout); err != nil {
			errs = append(errs, fmt.Errorf("stop operator: %w", err))
		}
	}
	if d.cp != nil {
		if err := d.cp.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.tmpDir != "" {
		if err := os.RemoveAll(d.tmpDir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(d.out, "failed (%s): %v\n", since(began), err)
		return
	}
	fmt.Fprintf(d.out, "done (%s)\n", since(began))
}

// withOperatorLog adds the end of the operator's log to an error, for the user
// to see why the group did not complete.
func (d *demo) withOperatorLog(err error) error {
	if d.operator == nil {
		return err
	}
	return fmt.Errorf("%w\n%s", err, d.operator.LogTail(20))
}

func since(t time.Time) time.Duration {
	return time.Since(t).Round(100 * time.Millisecond)
}
