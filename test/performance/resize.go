package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/operator"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/test/nswatch"
	"github.com/echelon-operator/echelon/test/storagestub"
)

// The resize scenario grows the claims of a three-zone group
// (spec.volumeClaimSizes) with the stand-in storage driver answering each
// size patch after a fixed delay, online. Zones go one after the other and a
// zone's claims grow at once, so the floor is the zones times that delay;
// the figure is the wall time from the size asked to Complete, and its
// ratio to the floor.

// resizeOptions are the resize scenario's flags.
type resizeOptions struct {
	claims int
	delay  time.Duration
}

// resizeResult is what the resize scenario measured.
type resizeResult struct {
	Zones          int            `json:"zones"`
	ClaimsPerZone  int            `json:"claimsPerZone"`
	DelaySeconds   float64        `json:"expansionDelaySeconds"`
	FloorSeconds   float64        `json:"floorSeconds"`
	WallSeconds    float64        `json:"wallSeconds"`
	Ratio          float64        `json:"ratioToFloor"`
	PodsDeleted    int64          `json:"podsDeleted"`
	Expansions     int64          `json:"expansions"`
	RequestsByVerb map[string]int `json:"operatorRequestsByVerb"`
	OperatorLogs   []string       `json:"operatorLogs"`
}

// runResize measures the resize scenario on a control plane of its own.
func runResize(ctx context.Context, cfg runConfig, o resizeOptions) (_ *resizeResult, retErr error) {
	say := cfg.say
	began := time.Now()
	cp, ns, stop, err := startControlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer stop(&retErr)
	c := cp.Client()
	nw, err := nswatch.Start(ctx, cp.Config(), operator.NewScheme(), ns, &appsv1.StatefulSet{}, &corev1.Pod{}, &v1alpha1.RolloutGroup{})
	if err != nil {
		return nil, err
	}
	defer nw.Close()
	w := &watcher{nw}
	var deleted atomic.Int64
	if err := w.AddHandler(ctx, &corev1.Pod{}, toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(any) { deleted.Add(1) }}); err != nil {
		return nil, err
	}
	class := "bench-stub"
	driver, err := storagestub.Start(ctx, c, storagestub.Options{Namespace: ns, Class: class, Expandable: true, Delay: o.delay})
	if err != nil {
		return nil, err
	}
	defer driver.Stop(context.WithoutCancel(ctx))
	for _, name := range memberNames {
		sts := statefulSet(ns, name, int32(o.claims), oldImage)
		sts.Spec.VolumeClaimTemplates = builders.MakeStatefulSet(ns, name).VolumeClaimTemplate("data", "1Gi", class).Obj().Spec.VolumeClaimTemplates
		if err := c.Create(ctx, sts); err != nil {
			return nil, fmt.Errorf("create StatefulSet %s: %w", name, err)
		}
	}
	rg := builders.MakeRolloutGroup(ns, groupName).Members(memberNames...).Obj()
	if err := c.Create(ctx, rg); err != nil {
		return nil, fmt.Errorf("create RolloutGroup: %w", err)
	}
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "every pod Ready", allReady(w, ns, oldImage, memberNames...))
	}); err != nil {
		return nil, err
	}
	say("%d StatefulSets of %d pods with a claim each, Ready in %s", len(memberNames), o.claims, since(began))
	user, err := cp.NewOperatorUser(ctx, "echelon-operator")
	if err != nil {
		return nil, err
	}
	if err := cp.GrantLeaderElection(ctx, user.Name, ns); err != nil {
		return nil, err
	}
	ops, err := startOperators(ctx, cfg, user, ns)
	defer func() { retErr = errors.Join(retErr, ops.stop()) }()
	if err != nil {
		return nil, err
	}
	res := &resizeResult{Zones: len(memberNames), ClaimsPerZone: o.claims, DelaySeconds: o.delay.Seconds(),
		FloorSeconds: float64(len(memberNames)) * o.delay.Seconds()}
	for _, in := range ops {
		res.OperatorLogs = append(res.OperatorLogs, in.LogFile)
	}
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "the group Complete", func(ctx context.Context) (bool, error) {
			got := &v1alpha1.RolloutGroup{}
			err := w.Get(ctx, types.NamespacedName{Namespace: ns, Name: groupName}, got)
			return err == nil && got.Status.Phase == v1alpha1.PhaseComplete, client.IgnoreNotFound(err)
		})
	}); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, operatorLogs(ops))
	}
	countsBefore := ops.counts()
	deletedBefore := deleted.Load()
	sent := time.Now()
	patch := `{"spec":{"volumeClaimSizes":[{"name":"data","size":"2Gi"}]}}`
	if err := c.Patch(ctx, &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: groupName}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return nil, fmt.Errorf("ask the group for 2Gi: %w", err)
	}
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "the volume resize Complete", func(ctx context.Context) (bool, error) {
			got := &v1alpha1.RolloutGroup{}
			if err := w.Get(ctx, types.NamespacedName{Namespace: ns, Name: groupName}, got); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			st := got.Status.VolumeResize
			return st != nil && st.Phase == v1alpha1.VolumeResizeComplete, nil
		})
	}); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, operatorLogs(ops))
	}
	res.WallSeconds = time.Since(sent).Seconds()
	res.Ratio = res.WallSeconds / res.FloorSeconds
	res.PodsDeleted = deleted.Load() - deletedBefore
	res.Expansions = driver.Expansions()
	res.RequestsByVerb = diffCounts(ops.counts(), countsBefore)
	say("%d claims resized in %s, floor %s (ratio %.2f), %d pods deleted", len(memberNames)*o.claims, seconds(res.WallSeconds), seconds(res.FloorSeconds), res.Ratio, res.PodsDeleted)
	return res, nil
}

// printResize prints the resize scenario's figures.
func printResize(out io.Writer, rs []*resizeResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(out, "\nVolume resize (spec.volumeClaimSizes), online growth, stand-in driver:")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "zones x claims\texpansion delay\tfloor (zones x delay)\twall\tratio\tpods deleted\texpansions\toperator writes")
	for _, r := range rs {
		_, writes, _ := tally(r.RequestsByVerb)
		fmt.Fprintf(tw, "%d x %d\t%s\t%s\t%s\t%.2f\t%d\t%d\t%d\n", r.Zones, r.ClaimsPerZone, seconds(r.DelaySeconds), seconds(r.FloorSeconds),
			seconds(r.WallSeconds), r.Ratio, r.PodsDeleted, r.Expansions, writes)
	}
	_ = tw.Flush()
}
