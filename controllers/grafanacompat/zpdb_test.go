/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package grafanacompat

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/echelon-operator/echelon/internal/metrics"
)

// TestZPDBReader: the budgets are read and their watch started when the
// list succeeds; a missing CRD or a forbidden list reads none, with no
// error (so no retry loop) and the metric at 0; any other error is one.
func TestZPDBReader(t *testing.T) {
	zpdb := func(name string, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetGroupVersionKind(zpdbGVK)
		u.SetNamespace("mimir")
		u.SetName(name)
		return u
	}
	gr := schema.GroupResource{Group: zpdbGVK.Group, Resource: "zoneawarepoddisruptionbudgets"}
	for _, tc := range []struct {
		name      string
		listErr   error
		readable  bool
		wantErr   bool
		wantNames []string
	}{
		{name: "installed", readable: true, wantNames: []string{"ingester"}},
		{name: "no CRD", listErr: &meta.NoKindMatchError{GroupKind: zpdbGVK.GroupKind(), SearchedVersions: []string{"v1"}}},
		{name: "no resource", listErr: apierrors.NewNotFound(gr, "")},
		{name: "forbidden", listErr: apierrors.NewForbidden(gr, "", errors.New("no RBAC"))},
		{name: "the API server fails", listErr: apierrors.NewServiceUnavailable("etcd"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithObjects(zpdb("ingester", map[string]any{"maxUnavailable": int64(1)})).
				WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if tc.listErr != nil {
						return tc.listErr
					}
					return c.List(ctx, list, opts...)
				}}).Build()
			watches := 0
			z := &zpdbReader{client: c, watch: func() error { watches++; return nil }}
			for range 2 {
				pdbs, readable, err := z.list(context.Background(), "mimir")
				if (err != nil) != tc.wantErr {
					t.Fatalf("error %v, want one: %v", err, tc.wantErr)
				}
				if readable != tc.readable {
					t.Errorf("readable %v, want %v", readable, tc.readable)
				}
				var names []string
				for _, p := range pdbs {
					names = append(names, p.Name)
				}
				if len(names) != len(tc.wantNames) || (len(names) > 0 && names[0] != tc.wantNames[0]) {
					t.Errorf("read %v, want %v", names, tc.wantNames)
				}
			}
			wantWatches, wantMetric := 0, 0.0
			if tc.readable {
				wantWatches, wantMetric = 1, 1
			}
			if watches != wantWatches {
				t.Errorf("watch started %d times over two lists, want %d", watches, wantWatches)
			}
			if got := testutil.ToFloat64(metrics.GrafanaCompatZPDBReadable); !tc.wantErr && got != wantMetric {
				t.Errorf("%s = %v, want %v", "echelon_grafana_compat_zpdbs_readable", got, wantMetric)
			}
		})
	}
}
