package rolloutgroup

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/patch"
	"github.com/echelon-operator/echelon/controllers/internal/source"
	"github.com/echelon-operator/echelon/internal/analysis"
	"github.com/echelon-operator/echelon/internal/budget"
	"github.com/echelon-operator/echelon/internal/hooks"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/podcall"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/internal/rollout/gate"
)

const (
	controllerName = "rolloutgroup"
	// evictionRetryInterval is how soon a refused eviction is tried again. PDB
	// status is not watched, so this is the one place the controller polls.
	evictionRetryInterval = 5 * time.Second
	// staleViewRetryInterval is how soon a group is planned again after a
	// deletion found the pod already gone or replaced. The watch event that
	// shows it usually comes first; this bounds the wait if it does not.
	staleViewRetryInterval = time.Second
	// maxConcurrentReconciles lets independent groups progress in parallel; one
	// group is never reconciled twice at once.
	maxConcurrentReconciles = 4
	// statusProgressInterval is how long progress-only status changes (counters,
	// message, the step of a rollout) may wait to be written. Phase, member and
	// condition changes are written at once. 10 s keeps a slow rollout (pods
	// taking 5 s to start) under 2 API writes per pod rolled, Events included
	// (make bench: 2.03 with 5 s).
	statusProgressInterval = 10 * time.Second
)

// Reconciler rolls out the pods of RolloutGroups.
type Reconciler struct {
	client.Client
	// apiReader reads from the API server, bypassing the cache: the live read
	// that confirms each batch.
	apiReader client.Reader
	events    recorder.EventRecorder
	deletions *deletionExpectations
	// partitions are the partition writes the cache does not show yet.
	partitions *partitionWrites
	revisions  *revisionMemo
	status     *statusLedger
	// batches holds the batches not told in a PodsRolled Event yet.
	batches  *batchLog
	queriers *querierCache
	// httpChecks sends the GETs of http analysis checks.
	httpChecks analysis.HTTPGetter
	// tlsObjects reads the Secrets and ConfigMaps of tls blocks: the
	// process's httptls.Objects, which watches each one read.
	tlsObjects client.Reader
	// hookCaller makes the calls of spec.hooks; podHost says how a pod of a
	// StatefulSet with a service name is reached (podcall.Addressing.Host);
	// hooksDone remembers the pods already called.
	hookCaller *hooks.Caller
	podHost    func(pod *corev1.Pod, service string) (host, why string)
	hooksDone  *hooks.Memo
	// fresh says whether the cache's pods are at least as new as the
	// budget's record: a batch it covers is decided on the cache, with no
	// live read (budget.Freshness); nil reads every batch's pods live.
	fresh *budget.Freshness
	now   func() time.Time
}

// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups,verbs=get;list;watch
// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=list;watch;patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list;watch

// Reconcile brings one RolloutGroup one step closer to every pod on its update
// revision: observe (cache), plan (pure), confirm the batch (one live read),
// record its hold on the group's disruption budget (when due), act, then
// write status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cached := &v1alpha1.RolloutGroup{}
	if err := r.Get(ctx, req.NamespacedName, cached); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get RolloutGroup: %w", err)
	}
	if cached.DeletionTimestamp != nil && controllerutil.ContainsFinalizer(cached, partitionFinalizer) {
		return ctrl.Result{}, r.handBackPartitions(ctx, cached, nil)
	}
	takenOver := !r.status.Knows(cached)
	rg, written := r.status.Base(cached)
	now := r.now()

	in, err := r.observe(ctx, rg, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	if takenOver {
		// What the previous process had not written yet comes from the pods;
		// it differs from written, so this pass writes it.
		rg.Status = recoverDeferred(rg.Status, in.Members)
		if rg.Status.LastBatchTime != nil {
			in.LastBatchTime = rg.Status.LastBatchTime.Time
		}
	}
	ap, written, restoreErr := r.analyze(ctx, rg, &in, written, now)
	plan := rollout.Decide(in)
	hp := r.memberHooks(ctx, rg, plan, now)
	if hp.heldMember != "" {
		// A failed member hook (failurePolicy Fail) holds the batch; a
		// partitioned member keeps its partition.
		plan.Delete, plan.Message, plan.Reason = nil, hp.message(), v1alpha1.ReasonHookFailed
	}
	// Every pod of the batch hears the hook before the budget decides on
	// it (before its deletion, or before the partition that releases it is
	// lowered): nothing slow sits between the decision and its act.
	plan, hp.heldPods = r.beforePodRemoval(ctx, rg, plan, in.Members, now)
	if len(plan.Delete) > 0 {
		heard := podUIDs(plan.Delete)
		if in, plan, err = r.confirmWithLiveRead(ctx, rg, in, plan); err != nil {
			return ctrl.Result{}, err
		}
		plan = r.withoutUnheard(rg, plan, heard)
	}
	// What must be on record before the batch goes (its AfterBatch gate, its
	// ordinals for the version-leak report) is written in one patch: the
	// batch's intent's, when the budget allows it.
	pre, preDue := preActRecord(ap, written, in, plan, now)
	// carriedAfterAct: the intent's write carried the status expected once
	// the batch has gone (statusAfterAct).
	carriedAfterAct := false
	if len(plan.Delete) > 0 {
		var held *v1alpha1.DisruptionHold
		var recorded *v1alpha1.RolloutGroupStatus
		var carried *v1alpha1.RolloutGroupStatus
		if preDue {
			carried = &pre
		}
		after := statusAfterAct(rg, in, plan, ap, hp, pre, now)
		if after != nil {
			carried = after
		}
		if plan, held, recorded, err = r.acquireBudget(ctx, rg, in, plan, carried); err != nil {
			return ctrl.Result{}, err
		}
		switch {
		case recorded != nil:
			written, preDue = *recorded, false
			carriedAfterAct = after != nil
			r.status.Wrote(rg, written, now)
			rg.Status.Disruption, rg.Status.LeakRecords = written.Disruption.DeepCopy(), written.LeakRecords
		default:
			// Refused: the plan waits, and what it needs on record is
			// judged again on it.
			rg.Status.Disruption, written.Disruption = held, held.DeepCopy()
			pre, preDue = preActRecord(ap, written, in, plan, now)
		}
	}
	if preDue {
		if written, err = r.recordGate(ctx, rg, written, pre, now); err != nil {
			return ctrl.Result{}, err
		}
		rg.Status.LeakRecords = written.LeakRecords
	}
	actCtx, cancelAct := fenced(ctx, plan)
	acted, actErr := r.removePods(actCtx, rg, plan, now)
	released, partitionErr := r.writePartitions(actCtx, rg, plan, in.Members)
	cancelAct()
	actErr = errors.Join(actErr, partitionErr, r.withdrawUntaken(ctx, rg, plan, acted.deleted+released), r.withdrawIdleReservations(ctx, rg, in, plan))
	acted.deleted += released
	if controllerutil.ContainsFinalizer(rg, partitionFinalizer) && len(rg.Spec.StatefulSets) > 0 {
		// Only a StatefulSet removed from an explicit list leaves the
		// group. A selector that matches a StatefulSet no more (a label
		// renamed in the upgrade that changes the templates) says nothing
		// of intent: handing its partition back would let the StatefulSet
		// controller roll every such zone at once.
		actErr = errors.Join(actErr, r.handBackPartitions(ctx, rg, in.Members))
	}
	countBudgetDecision(plan, acted)
	actErr = errors.Join(actErr, r.advanceRevisions(ctx, rg, plan, in.Members), restoreErr)
	ap.AfterAct(plan, acted.deleted)

	failure := withoutStaleViews(actErr)
	up := computeStatus(rg, plan, acted, ap, now)
	applyHooks(&up.status, rg.Generation, hp, now)
	if failure != nil {
		// observedGeneration says a pass over that generation succeeded (as in
		// Cluster API); a stale view is not a failure of the pass.
		up.status.ObservedGeneration = written.ObservedGeneration
	}
	r.trackLeaks(rg, in, plan, &up.status, now)
	tellAfter := r.tellDueBatches(rg, plan, now)
	r.recordTransition(rg, plan, up)
	r.recordStep(rg, rg.Status.Step, up.status.Step, plan.Step)
	r.recordRotation(rg, up)
	r.emitAnalysis(rg, ap)
	r.exportMetrics(rg, up)
	// What the intent's write carried must not stand for long when the act
	// fell short of it: a refused eviction, a failed deletion.
	fellShort := carriedAfterAct && (actErr != nil || acted.refused != "" || acted.deleted != int32(len(plan.Delete)))
	flushAfter, err := r.saveStatus(ctx, rg, written, up.status, now, fellShort)
	if err != nil {
		return ctrl.Result{}, errors.Join(actErr, err)
	}
	after := rollout.MinPositive(plan.RequeueAfter, up.recheckAfter)
	after = rollout.MinPositive(after, flushAfter)
	after = rollout.MinPositive(after, ap.RequeueAfter())
	after = rollout.MinPositive(after, tellAfter)
	if acted.refused != "" {
		after = rollout.MinPositive(after, evictionRetryInterval)
	}
	if hp.holding() {
		after = rollout.MinPositive(after, hookRetryInterval)
	}
	if failure != nil {
		return ctrl.Result{}, actErr
	}
	if actErr != nil {
		// Only stale views: not a failure of Echelon's, and resolved by
		// planning again soon, without the error backoff. Counted; logged
		// at debug level (issue 31, item 9).
		metrics.StaleActs.Inc()
		ctrl.LoggerFrom(ctx).V(1).Info("acted on a stale view (a batch or a template restore); planning again", "reason", actErr.Error())
		after = rollout.MinPositive(after, staleViewRetryInterval)
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// preActRecord is written with what must be on record before plan's batch
// goes (its AfterBatch gate, its ordinals for the version-leak report), and
// whether that differs from written.
func preActRecord(ap *gate.Pass, written v1alpha1.RolloutGroupStatus, in rollout.Input, plan rollout.Plan, now time.Time) (v1alpha1.RolloutGroupStatus, bool) {
	pre, due := written, ap.OpenBatchGateBefore(plan)
	if due {
		pre = ap.GateRecord(written)
	}
	if next, ok := withRemovals(pre, in, plan, now); ok {
		pre, due = next, true
	}
	return pre, due
}

// withoutStaleViews is err without the errors that wrap errStaleView, nil
// when there is nothing else. A pass's actions join their errors: a stale
// view in one of them (errors.Is finds it in any) must not hide a failure of
// another.
func withoutStaleViews(err error) error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var rest []error
		for _, e := range joined.Unwrap() {
			if e = withoutStaleViews(e); e != nil {
				rest = append(rest, e)
			}
		}
		return errors.Join(rest...)
	}
	if errors.Is(err, errStaleView) {
		return nil
	}
	return err
}

// saveStatus writes the new status when it differs from what the API server
// holds in a way users must see at once (or urgent says so), or when progress
// changes have waited statusProgressInterval; otherwise it keeps it in
// memory and returns when to write it.
func (r *Reconciler) saveStatus(ctx context.Context, rg *v1alpha1.RolloutGroup, written, next v1alpha1.RolloutGroupStatus, now time.Time, urgent bool) (time.Duration, error) {
	next = keepHold(written, next)
	// Recorded first, so that a failed write loses nothing this pass did (pods
	// rolled, the batch time): the next pass starts from it and writes it.
	wait := r.status.Defer(rg, written, next, now, statusProgressInterval)
	if equality.Semantic.DeepEqual(written, next) {
		return 0, nil
	}
	if wait > 0 && !urgent && !urgentStatusChange(rg.Spec, written, next) {
		return wait, nil
	}
	if err := patch.Status(ctx, r, rg, written, next, setGroupStatus); err != nil {
		return 0, fmt.Errorf("RolloutGroup: %w", err)
	}
	r.status.Wrote(rg, next, now)
	return 0, nil
}

func setGroupStatus(rg *v1alpha1.RolloutGroup, st v1alpha1.RolloutGroupStatus) { rg.Status = st }

// recordGate writes next (the pass's GateRecord: the pending gate or the
// rollback, its fresh check records and the controls acted on) before the
// deletions that open the gate or the template writes of the rollback, and
// returns what the API server now holds.
func (r *Reconciler) recordGate(ctx context.Context, rg *v1alpha1.RolloutGroup, written, next v1alpha1.RolloutGroupStatus, now time.Time) (v1alpha1.RolloutGroupStatus, error) {
	next = keepHold(written, next)
	if err := patch.Status(ctx, r, rg, written, next, setGroupStatus); err != nil {
		return written, fmt.Errorf("RolloutGroup: record the analysis before acting on it: %w", err)
	}
	r.status.Wrote(rg, next, now)
	return next, nil
}

// recordTransition emits the Events of a rollout (started, each member complete,
// complete) and of the phases a user must notice (paused, resumed, blocked,
// unblocked, stalled). A group that is merely created, scaled or waiting for a
// lost pod emits none: that is not a rollout.
func (r *Reconciler) recordTransition(rg *v1alpha1.RolloutGroup, plan rollout.Plan, up statusUpdate) {
	old, st := rg.Status, up.status
	if up.rolloutStarted {
		r.events.Eventf(rg, nil, corev1.EventTypeNormal, "RolloutStarted", "Rollout",
			"rollout started: %d of %d pods to roll, beginning with StatefulSet %s", plan.ToRoll, st.Replicas, st.CurrentStatefulSet)
	}
	if old.Phase != st.Phase {
		switch {
		case st.Phase == v1alpha1.PhaseBlocked:
			r.events.Eventf(rg, nil, corev1.EventTypeWarning, "Blocked", "Block", "%s", st.Message)
		case st.Phase == v1alpha1.PhaseStalled:
			r.events.Eventf(rg, nil, corev1.EventTypeWarning, v1alpha1.ReasonProgressDeadlineExceeded, "Stall", "%s", st.Message)
		case st.Phase == v1alpha1.PhasePaused:
			r.events.Eventf(rg, nil, corev1.EventTypeNormal, "Paused", "Pause", "%s", st.Message)
		case old.Phase == v1alpha1.PhasePaused:
			r.events.Eventf(rg, nil, corev1.EventTypeNormal, "Resumed", "Resume", "%s", st.Message)
		case old.Phase == v1alpha1.PhaseBlocked:
			r.events.Eventf(rg, nil, corev1.EventTypeNormal, "Unblocked", "Unblock", "%s", st.Message)
		}
	}
	// A member completes during a rollout when it was rolling, or waiting for
	// its last replaced pods; one merely unblocked or unpaused does not. The
	// last member's completion comes before the rollout's.
	if lookup.RolloutOpen(old) {
		oldPhase := map[string]v1alpha1.MemberPhase{}
		for _, m := range old.StatefulSets {
			oldPhase[m.Name] = m.Phase
		}
		for _, m := range st.StatefulSets {
			if prev := oldPhase[m.Name]; (prev == v1alpha1.MemberRolling || prev == v1alpha1.MemberWaiting) && m.Phase == v1alpha1.MemberComplete {
				r.events.Eventf(rg, nil, corev1.EventTypeNormal, "MemberComplete", "Rollout",
					"StatefulSet %s complete: %d/%d pods on revision %s", m.Name, m.UpdatedReplicas, m.Replicas, m.UpdateRevision)
			}
		}
	}
	if up.rolloutCompleted {
		r.events.Eventf(rg, nil, corev1.EventTypeNormal, "RolloutComplete", "Rollout",
			"rollout complete in %s: %d pods rolled, every pod of %s on its update revision",
			st.RolloutCompletionTime.Sub(st.RolloutStartTime.Time).Round(time.Second), st.PodsRolled, rollout.Plural(len(st.StatefulSets), "StatefulSet"))
	}
}

func (r *Reconciler) exportMetrics(rg *v1alpha1.RolloutGroup, up statusUpdate) {
	st := up.status
	metrics.SetGroupPhase(rg.Namespace, rg.Name, st.Phase)
	metrics.SetGroupReplicas(rg.Namespace, rg.Name, st.Replicas, st.UpdatedReplicas, st.AvailableReplicas)
	if st.LastProgressTime != nil {
		metrics.LastProgress.WithLabelValues(rg.Namespace, rg.Name).Set(float64(st.LastProgressTime.Unix()))
	}
	if up.rolloutCompleted && st.RolloutStartTime != nil && st.RolloutCompletionTime != nil {
		metrics.RolloutDuration.WithLabelValues(rg.Namespace, rg.Name).
			Observe(st.RolloutCompletionTime.Sub(st.RolloutStartTime.Time).Seconds())
	}
	if up.stalledNow {
		metrics.Stalls.WithLabelValues(rg.Namespace, rg.Name).Inc()
	}
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.deletions.ForgetGroup(key)
	r.status.Forget(key)
	r.queriers.forget(key)
	r.batches.forget(key)
	metrics.ForgetGroup(key.Namespace, key.Name)
}

// WithAddressing sets how the beforePodRemoval hook reaches pods (the
// --pod-address and --cluster-domain flags).
func (r *Reconciler) WithAddressing(a podcall.Addressing) *Reconciler {
	r.podHost = a.Host
	return r
}

// WithTLSObjects reads the Secrets and ConfigMaps of tls blocks through
// objects (the process's httptls.Objects) instead of live; nil keeps live.
func (r *Reconciler) WithTLSObjects(objects client.Reader) *Reconciler {
	if objects != nil {
		r.tlsObjects = objects
	}
	return r
}

// WithFreshness decides batches on the cache whenever fresh says its pods
// cover the budget's record.
func (r *Reconciler) WithFreshness(fresh *budget.Freshness) *Reconciler {
	r.fresh = fresh
	return r
}

// New returns the reconciler, reading through the
// manager's cache (whose indexes setupIndexes registers) and API reader.
func New(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{
		Client:     mgr.GetClient(),
		events:     source.Recorder(mgr.GetEventRecorder("echelon")),
		apiReader:  mgr.GetAPIReader(),
		deletions:  newDeletionExpectations(),
		partitions: newPartitionWrites(),
		revisions:  newRevisionMemo(),
		batches:    newBatchLog(),
		status:     newStatusLedger(),
		queriers:   newQuerierCache(),
		// Each request carries its own timeout (spec); none on the client.
		httpChecks: analysis.NewHTTPGetter(httptls.NewClient(0)),
		tlsObjects: mgr.GetAPIReader(),
		hookCaller: &hooks.Caller{HTTP: httptls.NewClient(0)},
		hooksDone:  hooks.NewMemo(),
		podHost:    podcall.Addressing{ClusterDomain: "cluster.local"}.Host,
		now:        time.Now,
	}
}
