package webhooks

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/budget"
	"github.com/echelon-operator/echelon/internal/egress"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/podcall"
	"github.com/echelon-operator/echelon/internal/podname"
	"github.com/echelon-operator/echelon/internal/scaling"
)

// Reasons of the prepare-downscale webhook's decisions (metric label).
const (
	reasonNoPrepare     = "no-prepare"
	reasonDryRun        = "dry-run"
	reasonPrepared      = "prepared"
	reasonZoneDelay     = "zone-delay"
	reasonDisruption    = "disruption-budget"
	reasonPrepareFailed = "prepare-failed"
	reasonRecordFailed  = "record-failed"
)

// Event reasons of the prepare-downscale webhook's denials, on the StatefulSet.
const (
	// EventReasonDownscaleTooEarly: the zone delay has not passed, or the
	// RolloutGroup's disruption budget allows no downscale of the zone now
	// (a rollout open, another zone held or not whole).
	EventReasonDownscaleTooEarly = "DownscaleTooEarly"
	// EventReasonPrepareFailed: a pod did not prepare, or the downscale could
	// not be recorded; the pods prepared were told to cancel.
	EventReasonPrepareFailed = "PrepareFailed"
)

// statefulSetsOnly: only StatefulSets have pods with ordinals to prepare.
var statefulSetsOnly = map[string]string{"statefulsets": v1alpha1.TargetKindStatefulSet}

// defaultPrepareTimeout is the per-call timeout of a policy stored before the
// CRD defaulted spec.downscale.prepare.timeout.
const defaultPrepareTimeout = 5 * time.Second

// PrepareDownscale is the mutating webhook (it never patches) that calls the
// prepare endpoint of every pod a downscale of a StatefulSet removes before
// admitting it, as the StatefulSet's ScalingPolicy's spec.downscale.prepare
// says. Any failure cancels the calls that may have taken effect and denies.
// It also denies a downscale the zone delay or the RolloutGroup's disruption
// budget holds, as the ScalingPolicy controller would, so that a person's
// kubectl scale follows the rules the controller follows.
type PrepareDownscale struct {
	Cluster Cluster
	// Budget judges a downscale of a member of a RolloutGroup on the API
	// server, and records the group's hold before the pods are prepared.
	Budget     DownscaleBudget
	Identity   Identity
	Pods       *podcall.Client
	Addressing podcall.Addressing
	// Secrets reads, live, the Secrets and ConfigMaps of
	// spec.downscale.prepare.tls.
	Secrets client.Reader
	Now     func() time.Time

	// cancels counts cancel calls still running after an answer: those to
	// pods whose prepare call got no answer (a pod that hangs must not hold
	// up the denial that names it).
	cancels sync.WaitGroup
}

// NewPodClient is the HTTP client of the prepare-downscale webhook's pod
// calls: bounded concurrency, each call observed in the webhook metrics.
// With https and no spec.downscale.prepare.tls the pods' certificates are
// not verified (see spec.downscale.prepare.scheme): pods are reached by IP
// or by a name their certificates rarely carry. A target with a tls block is
// called through its own transport, verified as the block says and observed
// alike (Wrap).
func NewPodClient() *podcall.Client {
	tr := httptls.NewTransport(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // documented on spec.downscale.prepare.scheme
	// The per-call timeout bounds each call; this only bounds one that lost its deadline.
	return &podcall.Client{Wrap: func(next http.RoundTripper) http.RoundTripper { return observedTransport{next: next} }, HTTP: &http.Client{
		Transport: observedTransport{next: tr},
		Timeout:   time.Minute,
		// A pod that redirects has not prepared: its 3xx is its answer.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (h *PrepareDownscale) decide(ctx context.Context, req *admissionv1.AdmissionRequest) verdict {
	change, policies, v, judged := readDownscale(ctx, req, h.Cluster, metrics.WebhookPrepareDownscale, statefulSetsOnly)
	if !judged {
		return v
	}
	own := h.Identity.ownScalingPolicyWriteOf(req, policies)
	// The no-downscale webhook would refuse this downscale after the mutating
	// webhooks have run: refusing it here keeps its pods from being prepared
	// for a downscale that cannot happen.
	if forbidding := forbiddingPolicy(policies); forbidding != nil && !own {
		return denyDownscaleNotAllowed(change, forbidding)
	}
	policy := preparingPolicy(policies)
	if policy == nil {
		return allow(reasonNoPrepare)
	}
	sts, v := requestStatefulSet(ctx, h.Cluster, req, change)
	if sts == nil {
		return v
	}
	// The controller applies the gate itself, with a live read, just before
	// it patches, and has recorded the downscale's intent: its own
	// downscale is not judged again. Any other is judged before its pods
	// are called, without a record, so that a refusal writes nothing; then
	// again, recorded, once they have answered: nothing slow sits between
	// the recorded decision and the downscale.
	if !own {
		if v, closed := h.gate(ctx, req, sts, change, policy, true); closed {
			return v
		}
	}
	targets, warnings, problem := h.podsToPrepare(ctx, sts, change, policy.Spec.Downscale.Prepare)
	if problem != nil {
		return *problem
	}
	if isDryRun(req) {
		if len(targets) > 0 {
			warnings = append(warnings, fmt.Sprintf("dry run: the prepare endpoint of pods %s was not called", podList(targets)))
		}
		return allow(reasonDryRun, warnings...)
	}
	callCtx, cancel := withAnswerMargin(egress.WithField(ctx, "spec.downscale.prepare"))
	defer cancel()
	timeout, clampWarning := callTimeout(callCtx, policy.Spec.Downscale.Prepare.Timeout)
	if clampWarning != "" {
		warnings = append(warnings, clampWarning)
	}
	results := h.Pods.Notify(callCtx, targets, timeout)
	if failures := failedCalls(targets, results); len(failures) > 0 {
		note := h.rollBack(callCtx, targets, results, timeout)
		v := deny(reasonPrepareFailed, fmt.Sprintf("downscale of %s from %d to %d denied: %s%s", change, *change.Old, *change.New, strings.Join(failures, "; "), note))
		v.warnings = warnings
		v.event = &denialEvent{regarding: workloadRef(change), reason: EventReasonPrepareFailed, action: "Prepare"}
		return v
	}
	if !own {
		if v, closed := h.gate(callCtx, req, sts, change, policy, false); closed {
			v.message += h.rollBack(callCtx, targets, results, timeout)
			return v
		}
	}
	// One record of the last downscale, where the ScalingPolicy controller and
	// the other zones' gates read it; without it the next zone could shrink
	// within the zone delay, so a failure undoes the preparation. It too must
	// end before the margin: admitted after the API server gave up, the
	// downscale would not happen and its pods would stay prepared.
	//
	// The record is provisional (status.pendingDownscale) until the
	// StatefulSet shows the new size: the API server may still refuse the
	// downscale after this answer (a conflict, a later webhook), and then
	// pendingDownscales tells the pods to cancel and restores the record.
	if err := h.Cluster.RecordDownscale(callCtx, policy, pendingRecord(callCtx, policy, *change.Old, *change.New, h.Now(), targets, results)); err != nil {
		note := h.rollBack(callCtx, targets, results, timeout)
		v := failed(reasonRecordFailed, http.StatusInternalServerError, fmt.Errorf("downscale of %s from %d to %d denied: %w%s", change, *change.Old, *change.New, err, note))
		v.event = &denialEvent{regarding: workloadRef(change), reason: EventReasonPrepareFailed, action: "Prepare"}
		return v
	}
	return allow(reasonPrepared, warnings...)
}

// laterAdmissionWindow is how long after the webhook's own deadline a
// downscale it admitted may take to be stored: the time one later webhook
// (the configurations' timeoutSeconds, 10 s by default) and the write take.
// A downscale not stored by then is taken as refused.
const laterAdmissionWindow = 10 * time.Second

// pendingRecord is the provisional record of a downscale from replicas from
// to replicas to admitted at now, which prepared the pods of targets that
// answered 2xx. A record still pending (an earlier request whose fate is not
// known yet) is merged into it: its pods stay to be cancelled, and the time
// to restore stays the one before either. A pending record the StatefulSet
// already shows (from, the stored replicas, at or below it) was stored, only
// not settled yet: it is not merged, and its lastDownscaleTime is the one to
// restore.
func pendingRecord(ctx context.Context, policy *v1alpha1.ScalingPolicy, from, to int32, now time.Time, targets []podcall.Target, results map[string]podcall.Result) v1alpha1.PendingDownscale {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = now.Add(laterAdmissionWindow)
	}
	rec := v1alpha1.PendingDownscale{
		Replicas:              to,
		AdmittedAt:            metav1.NewMicroTime(now),
		Deadline:              metav1.NewMicroTime(deadline.Add(laterAdmissionWindow)),
		PreviousDownscaleTime: policy.Status.LastDownscaleTime,
	}
	if old := policy.Status.PendingDownscale; old != nil && from > old.Replicas {
		rec.PreviousDownscaleTime = old.PreviousDownscaleTime
		rec.Pods = append(rec.Pods, old.Pods...)
	}
	for _, t := range targets {
		if results[t.Pod].Err != nil {
			continue
		}
		rec.Pods = slices.DeleteFunc(rec.Pods, func(p v1alpha1.PendingPod) bool { return p.Name == t.Pod })
		rec.Pods = append(rec.Pods, v1alpha1.PendingPod{Name: t.Pod, URL: t.URL})
	}
	return rec
}

// preparingPolicy is the first policy, by name, with spec.downscale.prepare.
func preparingPolicy(policies []v1alpha1.ScalingPolicy) *v1alpha1.ScalingPolicy {
	var found *v1alpha1.ScalingPolicy
	for i := range policies {
		p := &policies[i]
		if p.Spec.Downscale != nil && p.Spec.Downscale.Prepare != nil && (found == nil || p.Name < found.Name) {
			found = p
		}
	}
	return found
}

// statefulSet is the StatefulSet being downscaled: the request's new object,
// or for /scale (which carries only a Scale) the cached parent. Without one,
// the verdict says why.
func requestStatefulSet(ctx context.Context, cluster Cluster, req *admissionv1.AdmissionRequest, change replicaChange) (*appsv1.StatefulSet, verdict) {
	if !change.Scale {
		sts := &appsv1.StatefulSet{}
		if err := decodeObject("object", req.Object, appsv1.SchemeGroupVersion.WithKind(change.Kind), sts); err != nil {
			return nil, failed(reasonMalformed, http.StatusBadRequest, err)
		}
		if sts.Namespace == "" {
			sts.Namespace = req.Namespace
		}
		return sts, verdict{}
	}
	sts, err := cluster.StatefulSet(ctx, req.Namespace, change.Name)
	if err != nil {
		return nil, failed(reasonLookupFailed, http.StatusInternalServerError, err)
	}
	if sts == nil {
		return nil, failed(reasonLookupFailed, http.StatusInternalServerError, fmt.Errorf(
			"%s is not in the operator's cache yet, so its pods are unknown; retry", change))
	}
	return sts, verdict{}
}

// gate applies the controller's own rules to a downscale of a member of a
// RolloutGroup: the zone delay (scaling.DownscaleGate, on the cache), then
// the group's disruption budget, on the API server, which records the
// group's hold for this zone when it allows the downscale (not for a dry
// run): a second admission made at the same moment for another zone sees
// the hold and is refused. A hold recorded for a downscale that is refused
// later (a pod that does not prepare, a later webhook) only lapses.
func (h *PrepareDownscale) gate(ctx context.Context, req *admissionv1.AdmissionRequest, sts *appsv1.StatefulSet, change replicaChange, policy *v1alpha1.ScalingPolicy, dryRun bool) (verdict, bool) {
	group, err := h.Cluster.DownscaleGroup(ctx, sts)
	if err != nil {
		return failed(reasonLookupFailed, http.StatusInternalServerError, err), true
	}
	if group == nil {
		return verdict{}, false
	}
	var delay time.Duration
	if d := policy.Spec.MinTimeBetweenZoneDownscales; d != nil {
		delay = d.Duration
	}
	if gate := scaling.DownscaleGate(h.Now(), delay, group); !gate.Open {
		return tooEarly(reasonZoneDelay, fmt.Sprintf("downscale of %s from %d to %d denied: ScalingPolicy %s lets it happen %s",
			change, *change.Old, *change.New, policy.Name, gate.Why), change), true
	}
	return askBudget(ctx, h.Budget, req, sts, change, group.Name, delay, dryRun || isDryRun(req))
}

// askBudget asks the disruption budget of the RolloutGroup group whether
// sts, one of its members, may shrink as change says, and unless dryRun
// records the downscale's intent when it may. closed says the downscale is
// refused, or could not be judged, with v the answer.
func askBudget(ctx context.Context, b DownscaleBudget, req *admissionv1.AdmissionRequest, sts *appsv1.StatefulSet, change replicaChange, group string, zoneDelay time.Duration, dryRun bool) (v verdict, closed bool) {
	ask := budget.DownscaleRequest(sts, *change.Old, *change.New, holderOf(req, change), zoneDelay)
	answer, err := b.AcquireDownscale(ctx, client.ObjectKey{Namespace: sts.Namespace, Name: group}, ask, dryRun)
	if err != nil {
		return failed(reasonLookupFailed, http.StatusInternalServerError, fmt.Errorf("downscale of %s from %d to %d: %w", change, *change.Old, *change.New, err)), true
	}
	if answer.Allowed {
		return verdict{}, false
	}
	msg := fmt.Sprintf("downscale of %s from %d to %d denied: the disruption budget of RolloutGroup %s lets one zone at a time lose pods: %s",
		change, *change.Old, *change.New, group, answer.Message)
	if answer.RetryAfter > 0 {
		msg += fmt.Sprintf("; retry in %s", answer.RetryAfter.Round(time.Second))
	}
	return tooEarly(reasonDisruption, msg, change), true
}

// tooEarly refuses a downscale that may be admitted later, with a Warning
// Event on the workload.
func tooEarly(reason, msg string, change replicaChange) verdict {
	v := deny(reason, msg)
	v.event = &denialEvent{regarding: workloadRef(change), reason: EventReasonDownscaleTooEarly, action: "Deny"}
	return v
}

// maxHolderLength is status.disruption.holder's limit.
const maxHolderLength = 512

// holderOf names who asks for a downscale, for the group's hold.
func holderOf(req *admissionv1.AdmissionRequest, change replicaChange) string {
	holder := fmt.Sprintf("downscale of %s by %s", change, req.UserInfo.Username)
	if len(holder) > maxHolderLength {
		holder = strings.ToValidUTF8(holder[:maxHolderLength], "")
	}
	return holder
}

// maxPreparedPods bounds the pods one request may prepare: the calls, eight
// at a time, must fit in the webhook's timeout (at most 30s).
const maxPreparedPods = 1000

// podsToPrepare lists the pods the downscale removes, ordinals [new, old)
// from spec.ordinals.start, with their URLs. A pod that does not exist or is
// not running holds no state to hand off: it is left out, with a warning. A
// downscale whose pods cannot be addressed is denied (problem).
func (h *PrepareDownscale) podsToPrepare(ctx context.Context, sts *appsv1.StatefulSet, change replicaChange, ep *v1alpha1.PrepareDownscaleEndpoint) ([]podcall.Target, []string, *verdict) {
	if n := int64(*change.Old) - int64(*change.New); n > maxPreparedPods {
		v := deny(reasonPrepareFailed, fmt.Sprintf("downscale of %s from %d to %d denied: it removes %d pods, and the prepare-downscale webhook prepares at most %d in one request; downscale in steps",
			change, *change.Old, *change.New, n, maxPreparedPods))
		return nil, nil, &v
	}
	endpointTLS, err := httptls.Load(ctx, h.Secrets, sts.Namespace, ep.TLS, "spec.downscale.prepare.tls")
	if err != nil {
		v := deny(reasonPrepareFailed, fmt.Sprintf("downscale of %s from %d to %d denied: the pods cannot be called: ScalingPolicy %v", change, *change.Old, *change.New, err))
		v.event = &denialEvent{regarding: workloadRef(change), reason: EventReasonPrepareFailed, action: "Prepare"}
		return nil, nil, &v
	}
	lo, hi := podname.Removed(podname.Start(sts), *change.Old, *change.New)
	var targets []podcall.Target
	var skipped []string
	for ord := lo; ord < hi; ord++ {
		name := fmt.Sprintf("%s-%d", sts.Name, ord)
		pod, err := h.Cluster.Pod(ctx, sts.Namespace, name)
		if err != nil {
			v := failed(reasonLookupFailed, http.StatusInternalServerError, err)
			return nil, nil, &v
		}
		switch {
		case pod == nil:
			skipped = append(skipped, name+" (does not exist)")
			continue
		case pod.Status.Phase != corev1.PodRunning:
			skipped = append(skipped, fmt.Sprintf("%s (%s)", name, pod.Status.Phase))
			continue
		}
		host, why := h.Addressing.Host(pod, sts.Spec.ServiceName)
		if why != "" {
			v := deny(reasonPrepareFailed, fmt.Sprintf("downscale of %s from %d to %d denied: pod %s cannot be called: %s", change, *change.Old, *change.New, name, why))
			v.event = &denialEvent{regarding: workloadRef(change), reason: EventReasonPrepareFailed, action: "Prepare"}
			return nil, nil, &v
		}
		targets = append(targets, podcall.Target{Pod: name, URL: ep.URL(host), TLS: endpointTLS})
	}
	var warnings []string
	if len(skipped) > 0 {
		warnings = append(warnings, fmt.Sprintf("not called, as not running: %s", strings.Join(skipped, ", ")))
	}
	return targets, warnings, nil
}

// callTimeout is the policy's per-call timeout. When it is not shorter than
// what is left of the request's deadline, it becomes half of that, so that a
// pod that hangs is reported by name, and the others cancelled, before the API
// server gives up on the webhook; the warning says so.
func callTimeout(ctx context.Context, configured *metav1.Duration) (time.Duration, string) {
	timeout := defaultPrepareTimeout
	if configured != nil && configured.Duration > 0 {
		timeout = configured.Duration
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return timeout, ""
	}
	left := time.Until(deadline)
	if timeout < left {
		return timeout, ""
	}
	clamped := max(left/2, time.Millisecond)
	return clamped, fmt.Sprintf("spec.downscale.prepare.timeout %s is not shorter than the webhook's timeout (%s left): each pod call waits at most %s",
		timeout, left.Round(time.Millisecond), clamped.Round(time.Millisecond))
}

// withAnswerMargin ends the pod calls (and the wait for cancels) a tenth of
// the request's time, at most a second, before its deadline: the API
// server's clock started before the request reached the webhook, and the
// answer still has to reach it.
func withAnswerMargin(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, deadline.Add(-min(time.Until(deadline)/10, time.Second)))
}

// maxNamedFailures bounds the failed pods a denial describes one by one.
const maxNamedFailures = 3

// failedCalls describes the pods whose prepare call failed, in ordinal order,
// the first few with their answers.
func failedCalls(targets []podcall.Target, results map[string]podcall.Result) []string {
	var out []string
	more := 0
	for _, t := range targets {
		r := results[t.Pod]
		switch {
		case r.Err == nil:
		case len(out) < maxNamedFailures:
			out = append(out, fmt.Sprintf("pod %s did not prepare: %v", t.Pod, r.Err))
		default:
			more++
		}
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("%d more pods did not prepare", more))
	}
	return out
}

// rollBack cancels every call that may have taken effect, and says so for the
// denial's message. Pods that answered 2xx are prepared: they are told to
// cancel, with a context the API server cannot cancel (it may have given up
// already), and the answer waits for them until ctx ends; cancels still
// running then finish in the background, so that the denial reaches the API
// server before its timeout. Pods whose answer never came (a timeout, a
// broken connection) may have acted on the call all the same: they are told
// to cancel too, in the background, so that a pod that hangs does not hold up
// the denial twice. Pods that answered an error status did not prepare.
func (h *PrepareDownscale) rollBack(ctx context.Context, targets []podcall.Target, results map[string]podcall.Result, timeout time.Duration) string {
	var prepared, unknown []podcall.Target
	for _, t := range targets {
		switch r := results[t.Pod]; {
		case r.Err == nil:
			prepared = append(prepared, t)
		case r.Status == 0:
			unknown = append(unknown, t)
		}
	}
	log := logr.FromContextOrDiscard(ctx)
	detached := context.WithoutCancel(ctx)
	var note strings.Builder
	if len(prepared) > 0 {
		done := make(chan map[string]podcall.Result, 1)
		h.cancels.Add(1)
		go func() {
			defer h.cancels.Done()
			done <- h.Pods.Cancel(detached, prepared, timeout)
		}()
		select {
		case cancelled := <-done:
			fmt.Fprintf(&note, "; told the prepared pods %s to cancel", podList(prepared))
			for _, t := range prepared {
				if err := cancelled[t.Pod].Err; err != nil {
					fmt.Fprintf(&note, "; cancelling pod %s failed: %v", t.Pod, err)
					log.Error(err, "cancel of a prepared pod failed; it stays prepared until it is told otherwise", "pod", t.Pod)
				}
			}
		case <-ctx.Done():
			fmt.Fprintf(&note, "; telling the prepared pods %s to cancel", podList(prepared))
			h.cancels.Add(1)
			go func() {
				defer h.cancels.Done()
				for pod, r := range <-done {
					if r.Err != nil {
						log.Error(r.Err, "cancel of a prepared pod failed; it stays prepared until it is told otherwise", "pod", pod)
					}
				}
			}()
		}
	}
	if len(unknown) > 0 {
		fmt.Fprintf(&note, "; telling pods %s, whose answer never came, to cancel", podList(unknown))
		h.cancels.Add(1)
		go func() {
			defer h.cancels.Done()
			for pod, r := range h.Pods.Cancel(detached, unknown, timeout) {
				if r.Err != nil {
					log.Error(r.Err, "cancel of a pod whose prepare call got no answer failed", "pod", pod)
				}
			}
		}()
	}
	return note.String()
}

// podList names pods for messages.
func podList(targets []podcall.Target) string {
	names := make([]string, 0, len(targets))
	for _, t := range targets {
		names = append(names, t.Pod)
	}
	return strings.Join(names, ", ")
}

// observedTransport records each pod call in the webhook metrics: its
// duration and whether it failed (no answer, or not 2xx; 409 is a success
// for a cancel, as podcall counts it).
type observedTransport struct {
	next http.RoundTripper
}

func (t observedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	call := metrics.PodCallPrepare
	if req.Method == http.MethodDelete {
		call = metrics.PodCallCancel
	}
	failed := err != nil
	if resp != nil {
		failed = resp.StatusCode/100 != 2 && !(call == metrics.PodCallCancel && resp.StatusCode == http.StatusConflict)
	}
	metrics.ObservePodCall(call, time.Since(start), failed)
	return resp, err
}
