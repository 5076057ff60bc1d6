package integration

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/webhooks/webhookstest"
)

// quotedRefusal is a webhook's refusal as a doc quotes it: from
// `admission webhook "` to the end of the line (kubectl prefixes it with
// "Error from server (<reason>): " and, for apply, the file).
type quotedRefusal struct {
	doc     string
	line    int
	message string
}

// quotedRefusals lists the refusals the user docs quote.
func quotedRefusals(t *testing.T) []quotedRefusal {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot(), "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	var out []quotedRefusal
	for _, path := range docs {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		s := bufio.NewScanner(f)
		s.Buffer(nil, 1<<20)
		for n := 1; s.Scan(); n++ {
			line := s.Text()
			if i := strings.Index(line, `admission webhook "`); i >= 0 && strings.Contains(line, "denied the request") {
				out = append(out, quotedRefusal{doc: filepath.Base(path), line: n, message: strings.TrimSpace(line[i:])})
			}
		}
		f.Close()
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// docExample makes, in a fresh namespace, the objects a doc's example shows
// and returns the error of the request it shows refused.
type docExample struct {
	// quotes is a part of the quoted refusal that says it is this example's.
	quotes string
	run    func(t *testing.T, e *env, g *WithT, ns string) error
}

// TestDocsQuoteRealRefusals: every refusal of a webhook quoted in docs/*.md
// is what the API server answers, through the webhooks as installed
// (config/webhook: the mutating prepare-downscale is called before the
// validating no-downscale), to the example the doc shows. A new quoted
// refusal needs an example here.
func TestDocsQuoteRealRefusals(t *testing.T) {
	examples := []docExample{
		{quotes: "downscale of StatefulSet ingester-zone-a from 6 to 5 denied: ScalingPolicy ingester-zone-a-guard", run: scaleGuardedStatefulSet},
		{quotes: "downscale of StatefulSet ingester-zone-b from 6 to 4 denied: pod ingester-zone-b-5 did not prepare", run: prepareRefusedByOnePod},
		{quotes: `RolloutGroup.echelon.dev "ingester" is invalid: spec.analysis.checks[1].query`, run: groupWithUnknownVariable},
		{quotes: `DelayedDownscale.echelon.dev "ingester-zone-a-2" is invalid: spec.targetRef.name`, run: secondDelayedDownscale},
		{quotes: "RolloutGroup ingester: zone ingester-zone-a (1 not available) is disrupted; evict ingester-zone-b-4 later", run: evictWhileZoneDown},
		{quotes: "downscale of StatefulSet ingester-zone-b from 4 to 3 denied: the disruption budget of RolloutGroup ingester", run: scaleMemberWhileZoneDown},
	}
	quoted := quotedRefusals(t)
	if len(quoted) == 0 {
		t.Fatal("no quoted refusal found in docs/*.md")
	}
	for _, q := range quoted {
		var example *docExample
		for i := range examples {
			if strings.Contains(q.message, examples[i].quotes) {
				example = &examples[i]
			}
		}
		if example == nil {
			t.Errorf("%s:%d quotes a refusal no example here produces: %s", q.doc, q.line, q.message)
			continue
		}
		t.Run(q.doc+":"+example.quotes, func(t *testing.T) {
			e, g, ns := begin(t)
			err := example.run(t, e, g, ns)
			if err == nil {
				t.Fatalf("%s:%d: the example was admitted, want the refusal %s", q.doc, q.line, q.message)
			}
			if err.Error() != q.message {
				t.Errorf("%s:%d quotes\n  %s\nthe API server answers\n  %s", q.doc, q.line, q.message, err.Error())
			}
		})
	}
}

// scaleGuardedStatefulSet: docs/webhooks.md, "Refuse downscales": kubectl
// scale of a StatefulSet whose policy sets downscale.allowed: false.
func scaleGuardedStatefulSet(t *testing.T, e *env, g *WithT, ns string) error {
	ctx := context.Background()
	sts := builders.MakeStatefulSet(ns, "ingester-zone-a").Label("app", "ingester-zone-a").Replicas(6).Obj()
	guard := builders.MakeScalingPolicy(ns, "ingester-zone-a-guard").Target("", sts.Name).Obj()
	guard.Spec.Downscale = &v1alpha1.DownscaleRules{Allowed: ptr.To(false)}
	g.Expect(e.admin.Create(ctx, sts)).To(Succeed())
	g.Expect(e.admin.Create(ctx, guard)).To(Succeed())
	e.waitForCache(t, sts, guard)
	return scaleTo(ctx, e.admin, sts, 5)
}

// prepareRefusedByOnePod: docs/webhooks.md, "Prepare pods before they are
// removed": of the two pods a downscale from 6 to 4 removes, ingester-zone-b-5
// answers 503 "flushing".
func prepareRefusedByOnePod(t *testing.T, e *env, g *WithT, ns string) error {
	ctx := context.Background()
	pods := webhookstest.NewPodServer(t, 2, "ingester-zone-b", 0, 1, 2, 3, 4, 5)
	pods.Answer(http.MethodPost, "ingester-zone-b-5", webhookstest.Status(http.StatusServiceUnavailable, "flushing"))
	sts := builders.MakeStatefulSet(ns, "ingester-zone-b").Label("app", "ingester-zone-b").Replicas(6).Obj()
	prep := builders.MakeScalingPolicy(ns, "ingester-zone-b").Target("", sts.Name).Obj()
	prep.Spec.Downscale = &v1alpha1.DownscaleRules{Prepare: &v1alpha1.PrepareDownscaleEndpoint{
		PrepareEndpoint: v1alpha1.PrepareEndpoint{Path: "/ingester/prepare-shutdown", Port: pods.Port},
		Timeout:         &metav1.Duration{Duration: 5 * time.Second}}}
	g.Expect(e.admin.Create(ctx, sts)).To(Succeed())
	e.createServedPods(t, sts, pods)
	g.Expect(e.admin.Create(ctx, prep)).To(Succeed())
	e.waitForCache(t, sts, prep)
	g.Eventually(func() int {
		var list corev1.PodList
		g.Expect(e.cache.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		return len(list.Items)
	}, 10*time.Second, 50*time.Millisecond).Should(Equal(6))
	return scaleTo(ctx, e.admin, sts, 4)
}

// groupWithUnknownVariable: docs/analysis.md, "The query": a check whose
// query template uses {{ .Pod }}.
func groupWithUnknownVariable(_ *testing.T, e *env, _ *WithT, ns string) error {
	noData := v1alpha1.CheckCondition{HasData: ptr.To(false)}
	rg := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ingester"},
		Spec: v1alpha1.RolloutGroupSpec{
			StatefulSets: []v1alpha1.RolloutMember{{Name: "ingester-zone-a"}, {Name: "ingester-zone-b"}},
			Analysis: &v1alpha1.RolloutAnalysis{
				Prometheus: &v1alpha1.PrometheusSource{Address: "http://prometheus.monitoring.svc:9090"},
				Checks: []v1alpha1.AnalysisCheck{
					{Name: "no-critical-alerts", Query: `ALERTS{alertstate="firing",namespace="{{ .Namespace }}",severity="critical"}`, Condition: noData},
					{Name: "errors", Query: `up{pod=~"{{ .Pod }}-.*"}`, Condition: noData},
				}},
		}}
	return e.admin.Create(context.Background(), rg)
}

// secondDelayedDownscale: docs/delayed-downscale.md: a second
// DelayedDownscale of ingester-zone-a.
func secondDelayedDownscale(t *testing.T, e *env, g *WithT, ns string) error {
	ctx := context.Background()
	first := builders.MakeDelayedDownscale(ns, "ingester-zone-a").Delay("4h").PrepareEndpoint("/ingester/prepare-partition-downscale", 8080).Obj()
	g.Expect(e.admin.Create(ctx, first)).To(Succeed())
	e.waitForCache(t, first)
	second := builders.MakeDelayedDownscale(ns, "ingester-zone-a-2").Target("ingester-zone-a").Delay("4h").PrepareEndpoint("/ingester/prepare-partition-downscale", 8080).Obj()
	return e.admin.Create(ctx, second)
}

// scaleMemberWhileZoneDown: docs/webhooks.md, "Judge every downscale of a
// member": kubectl scale of zone b, which no ScalingPolicy guards, while a
// pod of zone a is not Ready.
func scaleMemberWhileZoneDown(t *testing.T, e *env, _ *WithT, ns string) error {
	sets := e.zones(t, ns, "", 4, "ingester-zone-a", "ingester-zone-b", "ingester-zone-c")
	e.waitForCache(t, sets[0], sets[1], sets[2])
	e.completeGroup(t, ns, "ingester-zone-a", "ingester-zone-b", "ingester-zone-c")
	e.setReady(t, ns, "ingester-zone-a-0", false, time.Time{})
	return scaleTo(context.Background(), e.admin, sets[1], 3)
}
