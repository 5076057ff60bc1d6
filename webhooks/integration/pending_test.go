package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/webhooks/webhookstest"
)

// TestPreparedDownscaleNotStored: the prepare-downscale webhook admits a
// downscale and prepares its pods, then the API server does not store it (a
// resourceVersion conflict, found after the mutating webhooks ran). The pods
// are told to cancel (DELETE) within the request's deadline, and the policy's
// record of the downscale is dropped, lastDownscaleTime back to what it was,
// so the other zones' delay is not held. A downscale that is stored keeps its
// record and its pods get no DELETE.
func TestPreparedDownscaleNotStored(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()

	sts, prep, pods := e.preparingStatefulSet(t, ns, 2)

	// A stored downscale: confirmed, its record kept, no DELETE.
	g.Expect(scaleTo(ctx, e.admin, sts, 4)).To(Succeed())
	g.Expect(pods.DistinctCalls()).To(Equal([]string{"POST ingester-4"}))
	var stored *metav1.MicroTime
	g.Eventually(func(g Gomega) {
		g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(prep), prep)).To(Succeed())
		g.Expect(prep.Status.PendingDownscale).To(BeNil(), "confirmed once the StatefulSet shows 4")
		g.Expect(prep.Status.LastDownscaleTime).NotTo(BeNil())
		stored = prep.Status.LastDownscaleTime
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(pods.DistinctCalls, 2*time.Second, 200*time.Millisecond).Should(Equal([]string{"POST ingester-4"}), "no DELETE for a stored downscale")

	// A downscale admitted by the webhook that the API server then refuses:
	// the update carries a resourceVersion that is no longer current.
	pods.Reset()
	stale := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sts.Name}}
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(stale), stale)).To(Succeed())
	bump := stale.DeepCopy()
	bump.Labels["touched"] = "yes"
	g.Expect(e.admin.Update(ctx, bump)).To(Succeed())
	e.waitForCache(t, bump)
	stale.Spec.Replicas = ptr.To[int32](2)
	err := e.admin.Update(ctx, stale)
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "want a conflict, got %v", err)
	g.Expect(pods.DistinctCalls()).To(Equal([]string{"POST ingester-2", "POST ingester-3"}), "the webhook prepared the pods before the conflict")
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(prep), prep)).To(Succeed())
	g.Expect(prep.Status.PendingDownscale).NotTo(BeNil(), "the webhook's record is provisional")
	g.Expect(prep.Status.PendingDownscale.Replicas).To(Equal(int32(2)))
	g.Expect(prep.Status.PendingDownscale.Pods).To(HaveLen(2))
	g.Expect(prep.Status.LastDownscaleTime.Time).To(BeTemporally(">", stored.Time), "the zone delay counts from the admitted downscale meanwhile")

	// The webhook's timeout (10s) is the deadline; the test allows it twice.
	g.Eventually(pods.DistinctCalls, 20*time.Second, 100*time.Millisecond).Should(Equal([]string{
		"DELETE ingester-2", "DELETE ingester-3", "POST ingester-2", "POST ingester-3"}), "the prepared pods are told to cancel")
	g.Eventually(func(g Gomega) {
		g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(prep), prep)).To(Succeed())
		g.Expect(prep.Status.PendingDownscale).To(BeNil(), "the record is cleared")
		g.Expect(prep.Status.LastDownscaleTime).NotTo(BeNil())
		g.Expect(prep.Status.LastDownscaleTime.Time).To(BeTemporally("==", stored.Time), "lastDownscaleTime is the stored downscale's again")
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(sts), sts)).To(Succeed())
	g.Expect(*sts.Spec.Replicas).To(Equal(int32(4)), "the refused downscale did not happen")
}

// TestPreparedDownscaleRefusedByALaterWebhook: another validating webhook
// refuses the downscale after prepare-downscale admitted it and prepared its
// pods: the pods get DELETE within the deadline and the record is cleared.
func TestPreparedDownscaleRefusedByALaterWebhook(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()

	sts, prep, pods := e.preparingStatefulSet(t, ns, 3)
	e.refuseStatefulSetUpdates(t, ns, "refused by the test's own webhook")
	g.Eventually(func() error {
		probe := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sts.Name}}
		if err := e.admin.Get(ctx, client.ObjectKeyFromObject(probe), probe); err != nil {
			return err
		}
		probe.Labels["probe"] = "yes"
		return e.admin.Update(ctx, probe, client.DryRunAll)
	}, 30*time.Second, 100*time.Millisecond).Should(MatchError(ContainSubstring("refused by the test's own webhook")))

	err := scaleTo(ctx, e.admin, sts, 3)
	g.Expect(err).To(MatchError(ContainSubstring("refused by the test's own webhook")))
	g.Expect(pods.DistinctCalls()).To(Equal([]string{"POST ingester-3", "POST ingester-4"}), "prepare-downscale admitted it first")
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(prep), prep)).To(Succeed())
	g.Expect(prep.Status.PendingDownscale).NotTo(BeNil(), "the webhook's record is provisional")

	g.Eventually(pods.DistinctCalls, 20*time.Second, 100*time.Millisecond).Should(Equal([]string{
		"DELETE ingester-3", "DELETE ingester-4", "POST ingester-3", "POST ingester-4"}), "the prepared pods are told to cancel")
	g.Eventually(func(g Gomega) {
		g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(prep), prep)).To(Succeed())
		g.Expect(prep.Status.PendingDownscale).To(BeNil(), "the record is cleared")
		g.Expect(prep.Status.LastDownscaleTime).To(BeNil(), "no downscale ever happened")
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
}

// refuseStatefulSetUpdates installs, until the test ends, a validating
// webhook that refuses every update of a StatefulSet in ns with message.
func (e *env) refuseStatefulSetUpdates(t *testing.T, ns, message string) {
	t.Helper()
	cert, err := webhookstest.NewCertificate()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: false,
			Result: &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Message: message}}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert.Cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "refuse.test.echelon.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL), CABundle: cert.CAPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"statefulsets", "statefulsets/scale"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if err := e.admin.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.admin.Delete(context.Background(), cfg) })
}
