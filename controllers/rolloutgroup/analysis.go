package rolloutgroup

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/analysis"
	"github.com/echelon-operator/echelon/internal/egress"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/internal/rollout/gate"
)

// analyze runs the group's analysis for this pass: the manual controls, the
// gates, the queries that are due (at most one per check per interval, and
// none without a started gate), the failure policy and the restoration of the
// templates of a rollback. It sets the planner's holds in in and returns the
// pass, which the controller completes after acting (AfterAct).
//
// Before the first template write of a rollback, the rollback (with the
// failure that caused it) is written to status, as a gate is before the
// deletions that open it; analyze returns the status the API server then
// holds. restoreErr is an API error recording the rollback or restoring the
// templates: the pass keeps it as a hold, and the caller returns the error
// once status is written.
//
// Queries run in the reconcile, concurrently, each bounded by the spec's
// timeout: a slow Prometheus delays this group's pass by one timeout at most,
// and other groups go on in the other workers.
func (r *Reconciler) analyze(ctx context.Context, rg *v1alpha1.RolloutGroup, in *rollout.Input, written v1alpha1.RolloutGroupStatus, now time.Time) (ap *gate.Pass, _ v1alpha1.RolloutGroupStatus, restoreErr error) {
	ap = gate.New(rg, now)
	ap.ApplyTo(in)
	pre := rollout.Decide(*in)
	ap.Begin(pre)
	if due := ap.DueChecks(); len(due) > 0 && pre.Blocked == nil {
		ap.Record(r.runChecks(ctx, rg, ap.QueryVars(), due))
	}
	ap.Decide(pre)
	if since, open := withoutProgressFor(rg, now); open {
		ap.FailOnStall(pre, since, progressDeadline(rg))
	}
	if ap.RollingBack() && pre.Blocked == nil {
		rb := ap.Rollback()
		var pending []string
		var failed string
		var err error
		if !ap.RollbackRecorded(written) {
			written, err = r.recordGate(ctx, rg, written, ap.GateRecord(written), now)
		}
		if err == nil {
			pending, failed, err = r.restoreTemplates(ctx, rg, rb, in.Members)
		}
		if err != nil {
			// Keep the pass (the failure, the rollback record, handled
			// annotations, query results): every member of the rollback is
			// held as not restored yet, and the error is returned once status
			// is written, so the pass is retried with backoff (soon and
			// without backoff for a StatefulSet changed since it was read:
			// errStaleView).
			pending, failed = nil, ""
			for _, m := range rb.Members {
				pending = append(pending, m.Name)
			}
			restoreErr = err
		}
		ap.SetRestore(pending, failed)
	}
	ap.ApplyTo(in)
	return ap, written, restoreErr
}

// withoutProgressFor is how long the group's open rollout has gone without
// progress, as its status (with what this process has not written yet) says;
// false when no rollout is open.
func withoutProgressFor(rg *v1alpha1.RolloutGroup, now time.Time) (time.Duration, bool) {
	if !lookup.RolloutOpen(rg.Status) || rg.Status.LastProgressTime == nil {
		return 0, false
	}
	return now.Sub(rg.Status.LastProgressTime.Time), true
}

// runChecks runs the due checks concurrently and returns their outcomes by
// check name. A Prometheus that cannot be reached, a Secret that cannot be
// read, a template that cannot be expanded: each is an error outcome of every
// check concerned, counted against its errorThreshold. HTTP checks do not need
// Prometheus.
func (r *Reconciler) runChecks(ctx context.Context, rg *v1alpha1.RolloutGroup, vars analysis.Vars, checks []v1alpha1.AnalysisCheck) map[string]analysis.Outcome {
	outcomes := make(map[string]analysis.Outcome, len(checks))
	var q analysis.Querier
	var qErr error
	for _, c := range checks {
		if c.HTTP == nil {
			q, qErr = r.querierFor(ctx, rg)
			break
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Go(func() {
			var o analysis.Outcome
			switch {
			case c.HTTP != nil:
				o = r.runHTTPCheck(ctx, rg, c, vars)
			case qErr != nil:
				o = analysis.Outcome{Err: qErr}
			default:
				o = runCheck(ctx, q, c, vars, r.now)
			}
			mu.Lock()
			outcomes[c.Name] = o
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, c := range checks {
		o := outcomes[c.Name]
		ctrl.LoggerFrom(ctx).V(1).Info("analysis query", "check", c.Name, "query", o.Query, "value", o.Verdict.Value,
			"success", o.Verdict.Success, "error", o.Err)
	}
	return outcomes
}

// runCheck expands, queries and judges one check.
func runCheck(ctx context.Context, q analysis.Querier, c v1alpha1.AnalysisCheck, vars analysis.Vars, now func() time.Time) analysis.Outcome {
	query, err := analysis.ExpandQuery(c.Query, vars)
	if err != nil {
		return analysis.Outcome{Err: err}
	}
	start := time.Now()
	samples, err := q.Query(egress.WithField(ctx, "spec.analysis.prometheus.address"), query, now())
	metrics.AnalysisQueryDuration.WithLabelValues(vars.Namespace, vars.Group).Observe(time.Since(start).Seconds())
	if err != nil {
		return analysis.Outcome{Query: query, Err: err}
	}
	verdict, err := analysis.Judge(c.Condition, samples)
	return analysis.Outcome{Query: query, Verdict: verdict, Err: err}
}

// runHTTPCheck expands the check's URL, reads its credentials (live), sends
// the GET and judges the answer.
func (r *Reconciler) runHTTPCheck(ctx context.Context, rg *v1alpha1.RolloutGroup, c v1alpha1.AnalysisCheck, vars analysis.Vars) analysis.Outcome {
	url, err := analysis.ExpandQuery(c.HTTP.URL, vars)
	if err != nil {
		return analysis.Outcome{Err: fmt.Errorf("spec.analysis.checks[%s].http.url: %w", c.Name, err)}
	}
	req := analysis.HTTPRequest{URL: url, Timeout: analysis.DefaultTimeout, Headers: map[string]string{}}
	if c.HTTP.Timeout != nil && c.HTTP.Timeout.Duration > 0 {
		req.Timeout = c.HTTP.Timeout.Duration
	}
	for _, h := range c.HTTP.Headers {
		req.Headers[h.Name] = h.Value
	}
	shown := analysis.DescribeHTTP(url)
	if ref := c.HTTP.AuthSecretRef; ref != nil {
		field := fmt.Sprintf("spec.analysis.checks[%s].http.authSecretRef", c.Name)
		data, err := r.secretData(ctx, rg.Namespace, ref.Name)
		if err != nil {
			return analysis.Outcome{Query: shown, Err: secretReadError(field, rg.Namespace, ref.Name, err)}
		}
		req.BearerToken = string(data["token"])
		req.Username, req.Password = string(data["username"]), string(data["password"])
		if req.BearerToken == "" && req.Username == "" {
			return analysis.Outcome{Query: shown, Err: fmt.Errorf("%s: Secret %s has neither a token key nor a username key", field, ref.Name)}
		}
	}
	if req.TLS, err = httptls.Load(ctx, r.tlsObjects, rg.Namespace, c.HTTP.TLS, fmt.Sprintf("spec.analysis.checks[%s].http.tls", c.Name)); err != nil {
		return analysis.Outcome{Query: shown, Err: err}
	}
	start := time.Now()
	ans, err := r.httpChecks.Get(egress.WithField(ctx, fmt.Sprintf("spec.analysis.checks[%s].http.url", c.Name)), req)
	metrics.AnalysisHTTPDuration.WithLabelValues(vars.Namespace, vars.Group).Observe(time.Since(start).Seconds())
	if err != nil {
		return analysis.Outcome{Query: shown, Err: err}
	}
	verdict, err := analysis.JudgeHTTP(*c.HTTP, c.Condition, ans)
	return analysis.Outcome{Query: shown, Verdict: verdict, Err: err}
}

// querierFor returns the group's Prometheus querier, reading its Secrets each
// time (through tlsObjects, which watches each Secret read alone, so that a
// rotation applies at the next check without a GET per check) and reusing
// the querier, with its connections, while address, credentials and TLS
// settings stay the same.
func (r *Reconciler) querierFor(ctx context.Context, rg *v1alpha1.RolloutGroup) (analysis.Querier, error) {
	src := rg.Spec.Analysis.Prometheus
	if src == nil {
		return nil, fmt.Errorf("spec.analysis.prometheus is not set, and a query check needs it")
	}
	cfg := analysis.PrometheusConfig{Address: src.Address, Timeout: analysis.DefaultTimeout}
	if src.Timeout != nil && src.Timeout.Duration > 0 {
		cfg.Timeout = src.Timeout.Duration
	}
	if ref := src.AuthSecretRef; ref != nil {
		data, err := r.secretData(ctx, rg.Namespace, ref.Name)
		if err != nil {
			return nil, secretReadError("spec.analysis.prometheus.authSecretRef", rg.Namespace, ref.Name, err)
		}
		cfg.BearerToken = string(data["token"])
		cfg.Username, cfg.Password = string(data["username"]), string(data["password"])
		if cfg.BearerToken == "" && cfg.Username == "" {
			return nil, fmt.Errorf("spec.analysis.prometheus.authSecretRef: Secret %s has neither a token key nor a username key", ref.Name)
		}
	}
	if tls := src.TLS; tls != nil {
		cfg.InsecureSkipVerify, cfg.ServerName = tls.InsecureSkipVerify, tls.ServerName
		if ref := tls.CASecretRef; ref != nil {
			data, err := r.secretData(ctx, rg.Namespace, ref.Name)
			if err != nil {
				return nil, secretReadError("spec.analysis.prometheus.tls.caSecretRef", rg.Namespace, ref.Name, err)
			}
			key := ref.Key
			if key == "" {
				key = "ca.crt"
			}
			if cfg.CAPEM = data[key]; len(cfg.CAPEM) == 0 {
				return nil, fmt.Errorf("spec.analysis.prometheus.tls.caSecretRef: Secret %s has no key %s", ref.Name, key)
			}
		}
	}
	return r.queriers.get(types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}, cfg)
}

// secretData reads a Secret through tlsObjects (httptls.Objects: a watch of
// that Secret alone; live where the Role grants only get). The operator's
// generated RBAC grants no right on Secrets: reading one needs a Role the
// installer grants in the group's namespace
// (config/rbac/analysis_secrets_role.yaml, or the chart's
// rbac.analysisSecretNamespaces), so that it cannot read every Secret of the
// cluster.
func (r *Reconciler) secretData(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	secret := &corev1.Secret{}
	if err := r.tlsObjects.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, secret); err != nil {
		return nil, err
	}
	return secret.Data, nil
}

// secretReadError is the check error for a Secret the operator could not
// read from field. A refusal says what to grant: the operator reads no Secret
// unless granted, so a missing grant is the likely cause, not a bug.
func secretReadError(field, namespace, name string, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s: the operator may not read Secret %s in namespace %s: grant it get on Secrets there (Helm value rbac.analysisSecretNamespaces)",
			field, name, namespace)
	}
	return fmt.Errorf("%s: read Secret %s: %w", field, name, err)
}

// emitAnalysis emits the pass's Events and counts its results.
func (r *Reconciler) emitAnalysis(rg *v1alpha1.RolloutGroup, ap *gate.Pass) {
	for _, e := range ap.Events() {
		r.events.Eventf(rg, nil, e.Type, e.Reason, e.Action, "%s", e.Message)
	}
	for _, res := range ap.Results() {
		metrics.AnalysisChecks.WithLabelValues(rg.Namespace, rg.Name, res.Check, res.Result).Inc()
	}
	if reason := ap.RollbackStarted(); reason != "" {
		metrics.Rollbacks.WithLabelValues(rg.Namespace, rg.Name, reason).Inc()
	}
}

// querierCache keeps one querier per group, rebuilt when its configuration
// changes.
type querierCache struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]cachedQuerier
}

type cachedQuerier struct {
	fingerprint [32]byte
	querier     analysis.Querier
}

func newQuerierCache() *querierCache {
	return &querierCache{entries: map[types.NamespacedName]cachedQuerier{}}
}

func (c *querierCache) get(key types.NamespacedName, cfg analysis.PrometheusConfig) (analysis.Querier, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	fp := sha256.Sum256(raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok && e.fingerprint == fp {
		return e.querier, nil
	}
	q, err := analysis.NewPrometheus(cfg)
	if err != nil {
		return nil, err
	}
	c.entries[key] = cachedQuerier{fingerprint: fp, querier: q}
	return q, nil
}

func (c *querierCache) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}
