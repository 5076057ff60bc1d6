package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	g.Expect(pods.Calls()).To(Equal([]string{"POST ingester-4"}))
	var stored *metav1.MicroTime
	g.Eventually(func(g Gomega) {
		g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(prep), prep)).To(Succeed())
		g.Expect(prep.Status.PendingDownscale).To(BeNil(), "confirmed once the StatefulSet shows 4")
		g.Expect(prep.Status.LastDownscaleTime).NotTo(BeNil())
		stored = prep.Status.LastDownscaleTime
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(pods.Calls, 2*time.Second, 200*time.Millisecond).Should(Equal([]string{"POST ingester-4"}), "no DELETE for a stored downscale")

	// A downscale admitted by the webhook that the API server then refuses:
	// the update carries a resourceVersion that is no longer current.
	pods.Reset()
	stale := statefulSet(ns, sts.Name, 0)
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(stale), stale)).To(Succeed())
	bump := stale.DeepCopy()
	bump.Labels["touched"] = "yes"
	g.Expect(e.admin.Update(ctx, bump)).To(Succeed())
	e.waitForCache(t, bump)
	stale.Spec.Replicas = ptr.To[int32](2)
	err := e.admin.Update(ctx, stale)
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "want a conflict, got %v", err)
	g.Expect(pods.Calls()).To(Equal([]string{"POST ingester-2", "POST ingester-3"}), "the webhook prepared the pods before the conflict")
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(prep), prep)).To(Succeed())
	g.Expect(prep.Status.PendingDownscale).NotTo(BeNil(), "the webhook's record is provisional")
	g.Expect(prep.Status.PendingDownscale.Replicas).To(Equal(int32(2)))
	g.Expect(prep.Status.PendingDownscale.Pods).To(HaveLen(2))
	g.Expect(prep.Status.LastDownscaleTime.Time).To(BeTemporally(">", stored.Time), "the zone delay counts from the admitted downscale meanwhile")

	// The webhook's timeout (10s) is the deadline; the test allows it twice.
	g.Eventually(pods.Calls, 20*time.Second, 100*time.Millisecond).Should(Equal([]string{
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
