package install

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/test/installed"
)

// TestGuardWaitsForThePodsItNames: GuardDownscales expects the downscale of
// <app>-prepared from 2 to 1 to be refused naming pod <app>-prepared-1, so it
// must not scale before the StatefulSet controller has created that pod. On
// a fresh, loaded machine that controller lagged and `make test` failed
// (issue 31, item 4); here a ValidatingAdmissionPolicy holds the pod back
// for a few seconds, as such a lag would, and GuardDownscales must still see
// the refusal.
func TestGuardWaitsForThePodsItNames(t *testing.T) {
	if testing.Short() {
		t.Skip("applies install.yaml to a real control plane; skipped with -short")
	}
	cp, _, _ := applyInstallYAML(t)
	ctx := context.Background()
	c := cp.Client()
	op := installed.Run(t, cp, operatorNamespace, operatorName)
	defer op.Stop()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lag"}}); err != nil {
		t.Fatal(err)
	}

	const held = "guard-prepared-1"
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "hold-" + held},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != '" + held + "'", Message: "held back by the test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "hold-" + held},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	// The API server enforces the binding once its admission plugin has
	// loaded it: a pod of that name is refused.
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "lag", Name: held},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/probe"}}}}
	deadline := time.Now().Add(time.Minute)
	for c.Create(ctx, probe.DeepCopy(), client.DryRunAll) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the ValidatingAdmissionPolicy never held a pod back")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Released ten seconds after StatefulSet guard-prepared is created: long
	// enough for a scale that does not wait to find pod guard-prepared-1
	// missing.
	releaseCtx, stop := context.WithCancel(ctx)
	released := make(chan error, 1)
	go func() {
		for c.Get(releaseCtx, client.ObjectKey{Namespace: "lag", Name: "guard-prepared"}, &appsv1.StatefulSet{}) != nil {
			select {
			case <-releaseCtx.Done():
				released <- nil
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		select {
		case <-releaseCtx.Done():
			released <- nil
		case <-time.After(10 * time.Second):
			released <- c.Delete(releaseCtx, binding)
		}
	}()
	defer func() {
		stop()
		if err := <-released; err != nil {
			t.Errorf("release pod %s: %v", held, err)
		}
	}()
	if err := installed.GuardDownscales(ctx, c, "lag", "guard"); err != nil {
		t.Fatalf("%v\n%s", err, op.LogTail(40))
	}
}
