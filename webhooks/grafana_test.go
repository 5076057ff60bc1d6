/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package webhooks

import (
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/migrate"
)

// zpdbRequest is a CREATE of a ZoneAwarePodDisruptionBudget with spec.
func zpdbRequest(op admissionv1.Operation, spec map[string]any) *reqBuilder {
	obj := map[string]any{
		"apiVersion": migrate.ZoneAwarePDBGroup + "/v1",
		"kind":       migrate.ZoneAwarePDBKind,
		"metadata":   map[string]any{"name": "ingester", "namespace": testNS},
		"spec":       spec,
	}
	return &reqBuilder{admissionv1.AdmissionRequest{
		UID:       "req-1",
		Kind:      metav1.GroupVersionKind{Group: migrate.ZoneAwarePDBGroup, Version: "v1", Kind: migrate.ZoneAwarePDBKind},
		Resource:  metav1.GroupVersionResource{Group: migrate.ZoneAwarePDBGroup, Version: "v1", Resource: "zoneawarepoddisruptionbudgets"},
		Name:      "ingester",
		Namespace: testNS,
		Operation: op,
		Object:    raw(obj),
	}}
}

// TestZPDBValidation: the Grafana zpdb-validation path refuses a
// ZoneAwarePodDisruptionBudget compat mode could not translate, naming the
// field, and admits a valid one and other operations.
func TestZPDBValidation(t *testing.T) {
	selector := map[string]any{"matchLabels": map[string]any{"name": "ingester"}}
	h := handler(metrics.WebhookGrafanaZPDBValidation, ZPDBValidation{}, &eventRecorder{})
	for _, tc := range []struct {
		name    string
		op      admissionv1.Operation
		spec    map[string]any
		allowed bool
		message string
	}{
		{"a count", admissionv1.Create, map[string]any{"maxUnavailable": int64(1), "selector": selector}, true, ""},
		{"a percentage on update", admissionv1.Update, map[string]any{"maxUnavailablePercentage": int64(50), "selector": selector}, true, ""},
		{"Mimir's partition regex", admissionv1.Create, map[string]any{"maxUnavailable": int64(1), "selector": selector,
			"podNamePartitionRegex": `[a-z\-]+-zone-[a-z]-([0-9]+)`, "podNameRegexGroup": int64(1)}, true, ""},
		{"a negative count", admissionv1.Create, map[string]any{"maxUnavailable": int64(-1), "selector": selector}, false,
			"spec.maxUnavailable: Invalid value: -1 is negative"},
		{"a percentage past 100", admissionv1.Create, map[string]any{"maxUnavailablePercentage": int64(120), "selector": selector}, false,
			"spec.maxUnavailablePercentage: Invalid value: 120 is not a percentage (0-100)"},
		{"both limits", admissionv1.Create, map[string]any{"maxUnavailable": int64(1), "maxUnavailablePercentage": int64(10), "selector": selector}, false,
			"spec.maxUnavailablePercentage: Invalid value: set together with maxUnavailable"},
		{"no selector", admissionv1.Create, map[string]any{"maxUnavailable": int64(1)}, false,
			"spec.selector: Invalid value: empty or missing"},
		{"a regex that does not compile", admissionv1.Create, map[string]any{"selector": selector, "podNamePartitionRegex": `(`}, false,
			"spec.podNamePartitionRegex: Invalid value: error parsing regexp"},
		{"a group past the regex's", admissionv1.Create, map[string]any{"selector": selector, "podNamePartitionRegex": `-(\d+)$`, "podNameRegexGroup": int64(2)}, false,
			"spec.podNameRegexGroup: Invalid value: 2: the regex has 1 groups"},
		{"a field of the wrong type", admissionv1.Create, map[string]any{"maxUnavailable": "one", "selector": selector}, false,
			"spec: Invalid value: cannot be read"},
		{"a delete", admissionv1.Delete, map[string]any{"maxUnavailable": int64(-1)}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkAnswer(t, serve(t, h, zpdbRequest(tc.op, tc.spec).review(), ""), tc.allowed, http.StatusForbidden, tc.message, "")
		})
	}
}
