package webhooks

import (
	"testing"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/test/builders"
)

// BenchmarkNoDownscale is the no-downscale webhook's HTTP handler, in
// process, on a StatefulSet update: decoding, the lookup (a fixed answer here,
// an indexed cache read in the operator), the decision, the answer and the
// metrics. TLS and the network are not in it.
func BenchmarkNoDownscale(b *testing.B) {
	forbid := *builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").DownscaleAllowed(false).Obj()
	cluster := &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbid}}
	h := handler(metrics.WebhookNoDownscale+"-bench", &NoDownscale{Cluster: cluster, Identity: Identity{Username: operatorUser}}, nil)
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"growth", stsUpdate("a", 3, 5).review()},
		{"denied", stsUpdate("a", 5, 3).review()},
		{"scale-denied", scaleUpdate("statefulsets", "a", 5, 3).review()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if a := serve(b, h, bc.body, "timeout=10s"); a.response == nil {
					b.Fatal("no answer")
				}
			}
		})
	}
}
