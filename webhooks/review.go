package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/internal/metrics"
)

// maxReviewBytes bounds the body of an AdmissionReview. An object is at most
// about 1.5 MiB (etcd's limit) and the review of an UPDATE carries two; a
// larger body is not from an API server.
const maxReviewBytes = 7 << 20

// Reasons of the "error" decision, shared by every webhook.
const (
	reasonUndecodable  = "undecodable"   // HTTP 400: not an AdmissionReview v1 with a request
	reasonMalformed    = "malformed"     // the request lacks what its resource needs (an object, replicas)
	reasonLookupFailed = "lookup-failed" // the cache or the API server failed us
	reasonPanic        = "panic"         // a bug: recovered, answered as the failurePolicy intends
	reasonUnhandled    = "unhandled"     // allowed: a resource or operation the webhook does not judge
)

// verdict is a webhook's answer to one request.
type verdict struct {
	allowed bool
	// failed marks an answer the webhook could not reach (metric decision
	// "error"): the request is refused with code, as failurePolicy Fail
	// would refuse it had the webhook not answered; a webhook whose
	// failurePolicy is Ignore allows a request it failed on with code 500,
	// with a warning carrying the message.
	failed bool
	// reason is the metric label: one short fixed word per outcome.
	reason   string
	code     int32
	message  string
	warnings []string
	// status, when set, is the answer's status as it is (a validation
	// error with its causes); otherwise code and message make one.
	status *metav1.Status
	// patch, when set on an allowed answer, is the JSON patch a mutating
	// webhook applies to the object.
	patch []byte
	// event, when set on a denial, is recorded on the object the denial is
	// about, unless the request is a dry run.
	event *denialEvent
}

// denialEvent is a Warning Event about a denied request.
type denialEvent struct {
	regarding runtime.Object
	// related is a second object the Event names, nil when none.
	related runtime.Object
	reason  string
	action  string
	// once, when set, keys the Event for the handler's limiter: one per key
	// per interval.
	once string
}

func allow(reason string, warnings ...string) verdict {
	return verdict{allowed: true, reason: reason, warnings: warnings}
}

func deny(reason, message string) verdict {
	return verdict{reason: reason, code: http.StatusForbidden, message: message}
}

// failed refuses a request the webhook could not judge: code 400 when the
// request is at fault, 500 when the webhook is.
func failed(reason string, code int32, err error) verdict {
	return verdict{failed: true, reason: reason, code: code, message: err.Error()}
}

// unhandled allows what the webhook is not configured to see: a webhook
// configuration that sends more than its rules in this package name (a
// hand-written one, a wider rule) must not block a cluster's writes.
func unhandled(webhook, what string) verdict {
	return allow(reasonUnhandled, fmt.Sprintf("the Echelon %s webhook does not handle %s; allowed", webhook, what))
}

// decider judges one admission request.
type decider interface {
	decide(ctx context.Context, req *admissionv1.AdmissionRequest) verdict
}

// eventSink records Warning Events; the manager's recorder is one.
type eventSink interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// reviewHandler is the HTTP side of a webhook: it decodes the AdmissionReview,
// asks the decider, answers, and records the metrics and the denial's Event.
// It never panics: a panic in a decider is answered as an internal error.
type reviewHandler struct {
	webhook string
	// failurePolicy is the one the webhook's configuration sets. An explicit
	// code 500 in an answer is a refusal whatever the configuration says, so
	// the handler answers as the policy intends itself (asPolicyIntends).
	failurePolicy admissionregistrationv1.FailurePolicyType
	decider       decider
	events        eventSink
	// limiter spaces the denial Events that have a key; nil records every one.
	limiter *eventLimiter
	log     logr.Logger
}

func (h *reviewHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var uid string
	answered := false
	defer func() {
		if p := recover(); p != nil {
			h.log.Error(fmt.Errorf("panic: %v", p), "webhook panicked; answering an internal error", "webhook", h.webhook, "stack", string(debug.Stack()))
			metrics.ObserveWebhook(h.webhook, metrics.DecisionError, reasonPanic, time.Since(start))
			if answered {
				return
			}
			if uid == "" {
				http.Error(w, "internal error", http.StatusInternalServerError)
				return
			}
			writeReview(w, uid, h.asPolicyIntends(verdict{failed: true, reason: reasonPanic, code: http.StatusInternalServerError,
				message: "internal error in the Echelon " + h.webhook + " webhook; see the operator's log"}))
		}
	}()

	review, status, err := readReview(r)
	if err != nil {
		metrics.ObserveWebhook(h.webhook, metrics.DecisionError, reasonUndecodable, time.Since(start))
		answered = true
		http.Error(w, err.Error(), status)
		return
	}
	req := review.Request
	uid = string(req.UID)

	ctx, cancel := withRequestDeadline(r, start)
	defer cancel()
	ctx = logr.NewContext(ctx, h.log.WithValues("webhook", h.webhook, "uid", uid, "kind", req.Kind.Kind,
		"namespace", req.Namespace, "name", req.Name, "user", req.UserInfo.Username))
	v := h.asPolicyIntends(h.decider.decide(ctx, req))

	if !v.allowed && v.event != nil && h.events != nil && !isDryRun(req) && h.limiter.allow(v.event.once, start) {
		h.events.Eventf(v.event.regarding, v.event.related, corev1.EventTypeWarning, v.event.reason, v.event.action, "%s", v.message)
	}
	decision := metrics.DecisionAllowed
	switch {
	case v.failed:
		decision = metrics.DecisionError
	case !v.allowed:
		decision = metrics.DecisionDenied
	}
	answered = true
	writeReview(w, uid, v)
	metrics.ObserveWebhook(h.webhook, decision, v.reason, time.Since(start))
	if v.failed {
		logr.FromContextOrDiscard(ctx).Error(errors.New(v.message), "admission request not judged", "reason", v.reason)
	} else if !v.allowed {
		logr.FromContextOrDiscard(ctx).Info("admission request denied", "reason", v.reason, "message", v.message)
	} else if len(v.patch) > 0 {
		logr.FromContextOrDiscard(ctx).Info("admission request changed", "reason", v.reason, "patch", string(v.patch), "warnings", v.warnings)
	}
}

// asPolicyIntends turns the failure of a webhook whose failurePolicy is
// Ignore, on its own side (code 500: a failed lookup, a panic), into an
// allowed answer whose warning names the problem; it is still counted as an
// error with its reason and logged. Under Fail it stays a refusal. A request
// at fault (code 400) is refused either way.
func (h *reviewHandler) asPolicyIntends(v verdict) verdict {
	if !v.failed || v.code != http.StatusInternalServerError || h.failurePolicy != admissionregistrationv1.Ignore {
		return v
	}
	v.allowed = true
	v.warnings = append(v.warnings, fmt.Sprintf("the Echelon %s webhook could not judge this request and allows it (failurePolicy Ignore): %s", h.webhook, v.message))
	return v
}

// readReview decodes an AdmissionReview v1 carrying a request, or says with
// an HTTP status why the body is not one.
func readReview(r *http.Request) (*admissionv1.AdmissionReview, int, error) {
	if r.Method != http.MethodPost {
		return nil, http.StatusMethodNotAllowed, fmt.Errorf("method %s: an AdmissionReview is POSTed", r.Method)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("reading the body: %w", err)
	}
	if len(body) > maxReviewBytes {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("body larger than %d bytes: not an AdmissionReview", maxReviewBytes)
	}
	review := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(body, review); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("body is not a JSON AdmissionReview: %w", err)
	}
	if gvk := review.GroupVersionKind(); gvk != admissionv1.SchemeGroupVersion.WithKind("AdmissionReview") {
		return nil, http.StatusBadRequest, fmt.Errorf("body is apiVersion %q kind %q, want admission.k8s.io/v1 AdmissionReview (set admissionReviewVersions: [v1] in the webhook configuration)",
			review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return nil, http.StatusBadRequest, errors.New("AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, http.StatusBadRequest, errors.New("AdmissionReview request has no uid")
	}
	return review, 0, nil
}

// writeReview answers the request uid with v.
func writeReview(w http.ResponseWriter, uid string, v verdict) {
	resp := &admissionv1.AdmissionResponse{UID: types.UID(uid), Allowed: v.allowed, Warnings: v.warnings}
	if v.allowed && len(v.patch) > 0 {
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType, resp.Patch = &pt, v.patch
	}
	if !v.allowed && v.status != nil {
		resp.Result = v.status
	} else if !v.allowed {
		status := &metav1.Status{Status: metav1.StatusFailure, Code: v.code, Message: v.message}
		switch v.code {
		case http.StatusForbidden:
			status.Reason = metav1.StatusReasonForbidden
		case http.StatusBadRequest:
			status.Reason = metav1.StatusReasonBadRequest
		case http.StatusInternalServerError:
			status.Reason = metav1.StatusReasonInternalError
		}
		resp.Result = status
	}
	out := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: resp,
	}
	body, err := json.Marshal(out)
	if err != nil { // cannot happen for these types; answered so that the API server applies its failurePolicy
		http.Error(w, "encoding the AdmissionReview: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// withRequestDeadline bounds the request's work by the deadline the API
// server set: it sends its webhook timeout as the "timeout" query parameter
// and gives up after it, so work past it (pod calls) is wasted. Without the
// parameter the bound is the longest timeout a webhook may have.
//
// The request's context is not cancelled with the process: the webhook
// server's base context is the manager's, cancelled as soon as the process
// begins to stop, while the server goes on finishing the requests in flight
// (a graceful shutdown, during the chart's preStop sleep). Judged on a
// cancelled context, such a request would fail ("record the disruption of
// zone ...: context canceled", a 500) and a kubectl drain beside a
// helm upgrade would stop with an error (the node tier saw it).
func withRequestDeadline(r *http.Request, start time.Time) (context.Context, context.CancelFunc) {
	d, err := time.ParseDuration(r.URL.Query().Get("timeout"))
	if err != nil || d <= 0 {
		d = maxRequestDuration
	}
	return context.WithDeadline(context.WithoutCancel(r.Context()), start.Add(d))
}

// maxRequestDuration bounds a request that names no timeout: the longest
// timeoutSeconds a webhook configuration may set.
const maxRequestDuration = 30 * time.Second

func isDryRun(req *admissionv1.AdmissionRequest) bool {
	return req.DryRun != nil && *req.DryRun
}

// DefaultFailurePolicy is the failurePolicy markers.go gives webhook: Ignore
// for the validation webhook, whose rules the controllers also report, and
// for hold-partition (see markers.go), Fail for the others.
func DefaultFailurePolicy(webhook string) admissionregistrationv1.FailurePolicyType {
	if webhook == metrics.WebhookValidate || webhook == metrics.WebhookHoldPartition {
		return admissionregistrationv1.Ignore
	}
	return admissionregistrationv1.Fail
}
