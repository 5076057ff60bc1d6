package webhooks

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/test/builders"
)

// TestValidateFailsOpen: the validation webhook's failurePolicy is Ignore by
// default, so what it cannot judge (a failed cache read, a panic) is allowed,
// with a warning naming the problem, and counted as an error with its reason;
// an explicit code 500 would be a refusal whatever the failurePolicy says.
// Set to Fail (the chart's webhooks.validation.failurePolicy), it refuses
// them as the API server would. The downscale webhooks (failurePolicy Fail)
// keep refusing.
func TestValidateFailsOpen(t *testing.T) {
	rg := builders.MakeRolloutGroup(testNS, "ingester").Members("zone-a").Obj()
	create := echelonRequest(admissionv1.Create, "rolloutgroups", nil, rg).review()
	broken := &Validate{Cluster: &fakeCluster{lookupErr: errors.New("cache not synced")}}
	for _, tc := range []struct {
		name    string
		webhook string
		policy  admissionregistrationv1.FailurePolicyType // empty: the webhook's default
		decider decider
		body    []byte
		allowed bool
		reason  string
		says    string
	}{
		{"validate, a failed lookup", metrics.WebhookValidate, "", broken, create, true, reasonLookupFailed, "cache not synced"},
		{"validate, a panic", metrics.WebhookValidate, "", panickingDecider{}, create, true, reasonPanic, "internal error in the Echelon validate webhook"},
		{"validate with Ignore, a failed lookup", metrics.WebhookValidate, admissionregistrationv1.Ignore, broken, create, true, reasonLookupFailed, "cache not synced"},
		{"validate with Fail, a failed lookup", metrics.WebhookValidate, admissionregistrationv1.Fail, broken, create, false, reasonLookupFailed, "cache not synced"},
		{"validate with Fail, a panic", metrics.WebhookValidate, admissionregistrationv1.Fail, panickingDecider{}, create, false, reasonPanic, "internal error in the Echelon validate webhook"},
		{"no-downscale, a failed lookup", metrics.WebhookNoDownscale, "", &NoDownscale{Cluster: &fakeCluster{lookupErr: errors.New("cache not synced")}}, stsUpdate("a", 3, 2).review(), false, reasonLookupFailed, "cache not synced"},
		{"no-downscale, a panic", metrics.WebhookNoDownscale, "", panickingDecider{}, stsUpdate("a", 3, 2).review(), false, reasonPanic, "internal error"},
		{"prepare-downscale, a panic", metrics.WebhookPrepareDownscale, "", panickingDecider{}, stsUpdate("a", 3, 2).review(), false, reasonPanic, "internal error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues(tc.webhook, metrics.DecisionError, tc.reason))
			h := handler(tc.webhook, tc.decider, &eventRecorder{}).(*reviewHandler)
			if tc.policy != "" {
				h.failurePolicy = tc.policy
			}
			a := serve(t, h, tc.body, "")
			if a.response == nil {
				t.Fatalf("HTTP %d %q, want an AdmissionReview", a.httpStatus, a.body)
			}
			if tc.allowed {
				if !a.response.Allowed || a.response.Result != nil || !strings.Contains(strings.Join(a.response.Warnings, "|"), tc.says) {
					t.Errorf("answer allowed %v result %+v warnings %q, want allowed with a warning saying %q", a.response.Allowed, a.response.Result, a.response.Warnings, tc.says)
				}
			} else if a.response.Allowed || a.response.Result == nil || a.response.Result.Code != http.StatusInternalServerError || !strings.Contains(a.response.Result.Message, tc.says) {
				t.Errorf("answer allowed %v result %+v, want a refusal with code 500 saying %q", a.response.Allowed, a.response.Result, tc.says)
			}
			if got := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues(tc.webhook, metrics.DecisionError, tc.reason)) - before; got != 1 {
				t.Errorf("error/%s counted %v, want 1", tc.reason, got)
			}
		})
	}
}
