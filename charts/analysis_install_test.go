/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package charts

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/test/installed"
)

// rollBackOnAnalysis gives the installed operator a group whose analysis gate
// fails, with onFailure Rollback, and waits until the group has rolled back
// and shows Failed. It proves that the install lets the operator roll back
// (read the stable revision's ControllerRevision, patch the StatefulSets'
// templates), and leaves the analysis metrics the chart's alerts and
// dashboard read (checks by result, query durations, rollbacks) on the
// operator's /metrics.
//
// Prometheus is played by a server answering its instant query API with one
// sample of value 1, which the check's "< 0.5" refuses: the query goes through
// client_golang's API client as with a real server; what the answer is does
// not matter to the install.
func rollBackOnAnalysis(ctx context.Context, t *testing.T, c client.Client, namespace, app string) error {
	t.Helper()
	prometheus := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,"1"]}]}}`, time.Now().Unix())
	}))
	t.Cleanup(prometheus.Close)

	zones := installed.Zones(app)
	for _, z := range zones {
		if err := c.Create(ctx, installed.StatefulSet(namespace, z, app, 1, "example.com/"+app+":1.0")); err != nil {
			return err
		}
	}
	rg := installed.RolloutGroup(namespace, app, zones, map[string]any{
		"onFailure": "Rollback",
		"analysis": map[string]any{
			"prometheus": map[string]any{"address": prometheus.URL},
			"checks": []any{map[string]any{
				"name":      "error-rate",
				"query":     `sum(rate(errors_total{zone="{{ .Member }}"}[1m]))`,
				"condition": map[string]any{"compare": map[string]any{"operator": "<", "threshold": "0.5"}},
				"interval":  "1s",
			}},
		},
	})
	if err := c.Create(ctx, rg); err != nil {
		return fmt.Errorf("create RolloutGroup with analysis: %w", err)
	}
	if err := installed.WaitPhase(ctx, c, namespace, app, "Complete"); err != nil {
		return err
	}
	if err := installed.SetImage(ctx, c, namespace, zones, "example.com/"+app+":1.1"); err != nil {
		return err
	}
	// Failed comes once the rollback is complete: while it rolls pods back
	// the group is Progressing.
	if err := installed.WaitPhase(ctx, c, namespace, app, "Failed"); err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: app}, rg); err != nil {
		return err
	}
	reason, _, _ := unstructured.NestedString(rg.Object, "status", "analysis", "failure", "reason")
	completed, _, _ := unstructured.NestedString(rg.Object, "status", "analysis", "rollback", "completionTime")
	if reason != "AnalysisFailed" || completed == "" {
		return fmt.Errorf("RolloutGroup %s/%s Failed with status.analysis.failure.reason %q and rollback completionTime %q; want AnalysisFailed after a complete rollback", namespace, app, reason, completed)
	}
	for _, z := range zones {
		var sts appsv1.StatefulSet
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: z}, &sts); err != nil {
			return err
		}
		if image := sts.Spec.Template.Spec.Containers[0].Image; image != "example.com/"+app+":1.0" {
			return fmt.Errorf("StatefulSet %s has image %s after the rollback, want its stable template's example.com/%s:1.0 restored", z, image, app)
		}
	}
	return nil
}
