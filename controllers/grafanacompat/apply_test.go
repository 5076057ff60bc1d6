/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package grafanacompat

// The reconciler against a real API server (etcd and kube-apiserver with
// Echelon's CRDs), its writes of Echelon resources counted at the client.

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/test/controlplane"
)

var apiServer = controlplane.Shared{Options: controlplane.Options{APIServerOnly: true, CRDDirs: []string{controlplane.CRDBasesDir}}}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := apiServer.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
	}
	os.Exit(code)
}

// writes counts the requests that write Echelon resources.
type writes struct {
	mu    sync.Mutex
	n     int
	which []string
}

func (w *writes) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && strings.HasPrefix(req.URL.Path, "/apis/"+v1alpha1.GroupVersion.Group+"/") {
			w.mu.Lock()
			w.n++
			w.which = append(w.which, req.Method+" "+req.URL.Path)
			w.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// take returns the writes counted since the last take.
func (w *writes) take() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, which := w.n, w.which
	w.n, w.which = 0, nil
	return n, which
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Compat mode writes a translated object when it differs from what is
// stored, and only then: a change of a workload that alters no translation
// (a Deployment rolled, a StatefulSet scaled, a reconcile with nothing new)
// writes nothing; a changed key writes the one object it changes; a field
// a user changed on a compat object is put back; a field the translation
// no longer sets is removed.
func TestReconcileWritesOnlyDifferences(t *testing.T) {
	cp := apiServer.Get(t)
	cp.DumpLogsOnFailure(t, 30)
	ctx := t.Context()
	ns := cp.NewNamespace(t)
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	counted := &writes{}
	cfg := rest.CopyConfig(cp.Config())
	cfg.Wrap(counted.wrap)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cp.Config(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{client: c, events: events.NewFakeRecorder(100), zpdbs: &zpdbReader{client: c, watch: func() error { return nil }}}
	reconcile := func(what string) (int, []string) {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: requestName}}); err != nil {
			t.Fatalf("%s: reconcile: %v", what, err)
		}
		return counted.take()
	}
	expect := func(what string, want int) {
		t.Helper()
		if n, which := reconcile(what); n != want {
			t.Errorf("%s: %d writes %v, want %d", what, n, which, want)
		}
	}

	// Three zones of ingester, the Grafana way: zone b and c follow zone a.
	for _, zone := range []string{"ingester-zone-a", "ingester-zone-b", "ingester-zone-c"} {
		sts := builders.MakeStatefulSet(ns, zone).Replicas(2).Label("rollout-group", "ingester").
			Label("grafana.com/min-time-between-zones-downscale", "1m").Obj()
		sts.Annotations = map[string]string{"rollout-max-unavailable": "2"}
		if zone != "ingester-zone-a" {
			sts.Annotations["grafana.com/rollout-downscale-leader"] = "ingester-zone-a"
		}
		if err := admin.Create(ctx, sts); err != nil {
			t.Fatal(err)
		}
	}
	if n, which := reconcile("the first pass"); n == 0 {
		t.Fatal("the first pass wrote nothing, want the translated objects")
	} else {
		t.Logf("the first pass wrote %d objects: %v", n, which)
	}
	expect("a pass with nothing new", 0)

	// A Deployment with no Grafana key, and a StatefulSet scaled.
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: builders.MakeStatefulSet(ns, "web").Obj().Spec.Template,
	}}
	if err := admin.Create(ctx, deployment); err != nil {
		t.Fatal(err)
	}
	zoneA := &appsv1.StatefulSet{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ingester-zone-a"}, zoneA); err != nil {
		t.Fatal(err)
	}
	zoneA.Spec.Replicas = ptr.To[int32](3)
	if err := admin.Update(ctx, zoneA); err != nil {
		t.Fatal(err)
	}
	expect("a Deployment made and a StatefulSet scaled", 0)

	// A changed key: the group's maxUnavailable.
	zoneA.Annotations["rollout-max-unavailable"] = "3"
	if err := admin.Update(ctx, zoneA); err != nil {
		t.Fatal(err)
	}
	expect("rollout-max-unavailable changed", 1)

	// A user edits a field compat mode owns: it is put back.
	group := &v1alpha1.RolloutGroup{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ingester"}, group); err != nil {
		t.Fatal(err)
	}
	before := group.DeepCopy()
	group.Spec.StatefulSets = group.Spec.StatefulSets[:1]
	if err := admin.Update(ctx, group); err != nil {
		t.Fatal(err)
	}
	expect("a user edited the compat group", 1)
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ingester"}, group); err != nil {
		t.Fatal(err)
	}
	if len(group.Spec.StatefulSets) != len(before.Spec.StatefulSets) {
		t.Errorf("the group has %d members after the pass, want the %d translated", len(group.Spec.StatefulSets), len(before.Spec.StatefulSets))
	}
	expect("a pass after the repair", 0)

	// A key removed: the field it set goes, and the API server's default
	// takes its place.
	if err := admin.Get(ctx, client.ObjectKeyFromObject(zoneA), zoneA); err != nil {
		t.Fatal(err)
	}
	delete(zoneA.Annotations, "rollout-max-unavailable")
	if err := admin.Update(ctx, zoneA); err != nil {
		t.Fatal(err)
	}
	expect("rollout-max-unavailable removed", 1)
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ingester"}, group); err != nil {
		t.Fatal(err)
	}
	if got := group.Spec.MaxUnavailable.String(); got != "1" {
		t.Errorf("maxUnavailable %s once rollout-max-unavailable is gone, want the default 1", got)
	}
	expect("a pass after the removal", 0)
}
