package e2e

import (
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
)

// watchJitter is how much later than the API server's order the test's
// watches may deliver one event than another on a loaded machine.
const watchJitter = 250 * time.Millisecond

// Metric-gated rollouts against a real Prometheus scraping an exporter the spec
// controls. Every spec watches every pod with the monitor and fails on any
// breach of the guarantees, rollbacks included.
var _ = Describe("RolloutGroup metric-gated rollouts", func() {
	It("passes every zone gate of a healthy rollout, each after its soak time", func(ctx SpecContext) {
		const soak = 5 * time.Second
		g, _, mon, op := newAnalyzedZones(ctx, 3, v1alpha1.FailurePause, func(p *promSetup) *v1alpha1.RolloutAnalysis {
			return p.analysis(soak,
				errorRateCheck(nil),
				errorRateCheck(func(c *v1alpha1.AnalysisCheck) {
					c.Name, c.Query = "zone-healthy", errorsQuery+" == 0"
					c.Condition = v1alpha1.CheckCondition{HasData: ptr.To(true)}
				}))
		})
		pods := recordPods(ctx, g.ns)
		timeline := g.recordGroup(ctx)

		g.setVersion(ctx, "v2")
		revs := g.updateRevisions(ctx)
		rg := g.waitComplete(ctx, 2*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.MemberOrder()).To(Equal(g.zones))

		complete, ok := timeline.completedAgain()
		Expect(ok).To(BeTrue(), "the group never reported Complete after the rollout:\n%s", timeline)
		// Each member's next step (the next member's first deletion, or the
		// group's completion after the last) comes soakTime after the member was
		// whole, as the test saw both through its watches. The operator starts
		// the soak later than the test sees the last pod Ready (it waits for the
		// StatefulSet's status to agree), so the gap is soakTime and a little
		// more; watchJitter allows for the test process being scheduled late
		// on a loaded machine. An operator that ignored the soak would delete
		// within a reconcile, seconds early.
		for i, z := range g.zones {
			whole, ok := pods.wholeAt(z, 3, revs[z])
			Expect(ok).To(BeTrue(), "%s never had every pod Ready on %s", z, revs[z])
			next, what := complete.At, "the group reported Complete"
			if i+1 < len(g.zones) {
				d, ok := pods.firstDeletion(g.zones[i+1], whole)
				Expect(ok).To(BeTrue())
				next, what = d.At, "the first pod of "+g.zones[i+1]+" was deleted"
			}
			gap := next.Sub(whole)
			AddReportEntry(fmt.Sprintf("soak of %s", z), fmt.Sprintf("%s %s after %s was whole (soakTime %s)", what, gap.Round(time.Millisecond), z, soak))
			Expect(gap).To(BeNumerically(">=", soak-watchJitter), "%s %s after %s was whole, before soakTime %s:\n%s", what, gap, z, soak, timeline)
			soaked := func(r groupRecord) bool {
				return r.Phase == v1alpha1.PhaseAnalyzing && r.Reason == v1alpha1.ReasonSoaking && r.gate() == z
			}
			_, ok = timeline.first(soaked)
			Expect(ok).To(BeTrue(), "the group never said it was soaking %s:\n%s", z, timeline)
		}

		passed := g.eventsOf(ctx, "GatePassed")
		Expect(passed).To(HaveLen(3), "one GatePassed per member")
		for i, z := range g.zones {
			Expect(passed[i]).To(And(HavePrefix("Normal: AfterMember gate of "+z+" "), ContainSubstring("error-rate Passed (0)"),
				ContainSubstring("zone-healthy Passed (0)")))
		}
		for _, m := range rg.Status.StatefulSets {
			Expect(m.GatePassedRevision).To(Equal(m.UpdateRevision), "member %s passed its gate for its update revision", m.Name)
		}
		Expect(rg.Status.Analysis.Gate).To(BeNil())
		for _, check := range []string{checkName, "zone-healthy"} {
			Expect(g.checkResults(op, check)).To(And(HaveKeyWithValue("failure", 0.0), HaveKeyWithValue("error", 0.0),
				HaveKeyWithValue("success", BeNumerically(">=", 3))), "queries of %s by result", check)
		}
		last := checkOf(Default, rg.Status.Analysis, checkName)
		Expect(last.Query).To(Equal(`echelon_e2e_errors{zone="ingester-zone-c"}`), "the query is templated with the member")
		Expect(last.ConsecutiveFailures + last.ConsecutiveErrors).To(BeZero())
	})

	It("holds the group when a zone's metric turns bad mid-rollout (onFailure Pause), and completes after a retry from kubectl", func(ctx SpecContext) {
		// The soak holds zone-a's gate open while zone-b's metric turns bad, so
		// zone-b's gate queries the bad value from its first query.
		const soak = 4 * time.Second
		g, p, mon, _ := newAnalyzedZones(ctx, 3, v1alpha1.FailurePause, func(p *promSetup) *v1alpha1.RolloutAnalysis {
			return p.analysis(soak, errorRateCheck(nil))
		})
		pods := recordPods(ctx, g.ns)
		timeline := g.recordGroup(ctx)

		g.setVersion(ctx, "v2")
		revs := g.updateRevisions(ctx)
		g.waitSoaking(ctx, "ingester-zone-a")
		p.flip(ctx, "ingester-zone-b", badErrors)
		Expect(rollsOf(mon, "ingester-zone-b")).To(BeZero(), "Prometheus must have the bad value before zone-b is rolled:\n%s", timeline)

		rg := g.waitPhase(ctx, v1alpha1.PhaseFailed, time.Minute)
		Expect(readyReason(rg)).To(Equal(v1alpha1.ReasonAnalysisFailed))
		f := rg.Status.Analysis.Failure
		Expect(f).NotTo(BeNil())
		Expect(f.Reason).To(Equal(v1alpha1.ReasonAnalysisFailed))
		Expect(f.Check).To(Equal(checkName))
		Expect(f.Gate.Member).To(Equal("ingester-zone-b"))
		Expect(rg.Status.Message).To(And(ContainSubstring("check error-rate failed: value 5"), ContainSubstring("ingester-zone-b")))
		Expect(checkOf(Default, rg.Status.Analysis, checkName)).To(And(
			HaveField("Phase", v1alpha1.CheckFailed), HaveField("LastValue", "5"), HaveField("ConsecutiveErrors", BeZero())))
		Expect(g.eventsOf(ctx, "GateFailed")).To(ConsistOf(And(HavePrefix("Warning: check error-rate failed: value 5"),
			ContainSubstring("AfterMember gate of ingester-zone-b"), ContainSubstring("onFailure Pause"))))
		whole, ok := pods.wholeAt("ingester-zone-b", 3, revs["ingester-zone-b"])
		Expect(ok).To(BeTrue())
		failed, _ := timeline.first(func(r groupRecord) bool { return r.Phase == v1alpha1.PhaseFailed })
		AddReportEntry("zone-b whole to Failed", failed.At.Sub(whole).Round(time.Millisecond).String())

		// A group is never reconciled twice at once and deletes before it writes
		// status, so the pods live now are the ones the failure must keep. Were
		// the hold ignored, zone-c's first pod would go within a reconcile.
		live := livePodUIDs(ctx, g.ns)
		Consistently(func() []string { return deletedOf(mon, live) }).WithTimeout(3*time.Second).Should(BeEmpty(),
			"no pod may be deleted while the failed gate holds the group")
		Expect(g.get(ctx).Status.Phase).To(Equal(v1alpha1.PhaseFailed))
		Expect(rollsOf(mon, "ingester-zone-c")).To(BeZero())

		p.flip(ctx, "ingester-zone-b", 0)
		g.annotate(ctx, v1alpha1.AnnotationRetry, "first")
		rg = g.waitComplete(ctx, time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.MemberOrder()).To(Equal(g.zones))
		Expect(rg.Status.Analysis.HandledRetry).To(Equal("first"))
		Expect(rg.Status.Analysis.Failure).To(BeNil())
		Expect(g.eventsOf(ctx, "RetryRequested")).To(ConsistOf(ContainSubstring("AfterMember gate of ingester-zone-b")))
		Expect(g.eventsOf(ctx, "GatePassed")).To(HaveLen(3), "zone-a's gate, then zone-b's after the retry, then zone-c's")
	})

	It("rolls every moved pod back to its old revision when a zone gate fails (onFailure Rollback)", func(ctx SpecContext) {
		// The soak holds each gate open for a while: the flip lands while
		// zone-b's gate is pending, before it could pass.
		const soak = 6 * time.Second
		g, p, mon, op := newAnalyzedZones(ctx, 3, v1alpha1.FailureRollback, func(p *promSetup) *v1alpha1.RolloutAnalysis {
			return p.analysis(soak, errorRateCheck(nil))
		})
		timeline := g.recordGroup(ctx)
		stable := g.updateRevisions(ctx)

		g.setVersion(ctx, "v2")
		g.waitSoaking(ctx, "ingester-zone-b")
		flipped := p.flip(ctx, "ingester-zone-b", badErrors)

		rg := g.waitPhase(ctx, v1alpha1.PhaseFailed, time.Minute)
		Expect(rg.Status.Analysis.Rollback).NotTo(BeNil())
		Expect(rg.Status.Analysis.Rollback.CompletionTime).NotTo(BeNil(), "Failed comes once the rollback is complete")
		Expect(readyReason(rg)).To(Equal(v1alpha1.ReasonAnalysisFailed))
		// zone-c's template moved too, though none of its pods did: it is
		// restored with the others.
		Expect(rg.Status.Message).To(And(ContainSubstring("check error-rate failed: value 5"),
			ContainSubstring("rolled back 3 StatefulSets")))
		g.waitPodsOn(ctx, "v1")
		g.expectPodsOnRevisions(ctx, stable)
		expectNoBreaches(mon)

		// Every pod that moved came back, the most recently rolled zone first;
		// zone-c never moved and was never touched.
		Expect(mon.DeletionsWhere(versionAnnotation, "v2")).To(HaveLen(6), "each of the 6 moved pods is rolled back once")
		Expect(membersInOrder(mon.DeletionsWhere(versionAnnotation, "v2"))).To(Equal([]string{"ingester-zone-b", "ingester-zone-a"}))
		Expect(rollsOf(mon, "ingester-zone-c")).To(BeZero())
		members := rg.Status.Analysis.Rollback.Members
		Expect(members).To(HaveLen(3))
		for _, m := range members {
			Expect(m.To).To(Equal(stable[m.Name]))
			sts := &appsv1.StatefulSet{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: m.Name}, sts)).To(Succeed())
			Expect(sts.Spec.Template.Annotations[versionAnnotation]).To(Equal("v1"), "template of %s restored", m.Name)
		}
		for _, m := range rg.Status.StatefulSets {
			Expect(m.StableRevision).To(Equal(stable[m.Name]))
		}

		Eventually(func() map[string]int { return g.eventReasons(ctx) }).Should(And(
			HaveKeyWithValue("GateFailed", 1), HaveKeyWithValue("RollbackStarted", 1),
			HaveKeyWithValue("TemplateRestored", 3), HaveKeyWithValue("RollbackComplete", 1)))
		Expect(g.eventsOf(ctx, "GateFailed")).To(ConsistOf(And(HavePrefix("Warning: check error-rate failed: value 5"),
			ContainSubstring("onFailure Rollback"))))
		Eventually(func() float64 {
			return g.operatorMetric(op, "echelon_rolloutgroup_rollbacks_total", map[string]string{"reason": v1alpha1.ReasonAnalysisFailed})
		}).Should(Equal(1.0))

		failedAt, _ := timeline.first(func(r groupRecord) bool { return r.Analysis != nil && r.Analysis.Failure != nil })
		firstBack := mon.DeletionsWhere(versionAnnotation, "v2")[0]
		AddReportEntry("flip to failure", failedAt.At.Sub(flipped).Round(time.Millisecond).String())
		AddReportEntry("flip to first rollback deletion", firstBack.At.Sub(flipped).Round(time.Millisecond).String())
		completed, _ := timeline.first(func(r groupRecord) bool { return r.Phase == v1alpha1.PhaseFailed })
		AddReportEntry("first rollback deletion to rollback complete", completed.At.Sub(firstBack.At).Round(time.Millisecond).String())
		for _, r := range timeline.all() {
			if r.At.After(failedAt.At) && r.Phase != v1alpha1.PhaseFailed {
				Expect(r.Reason).To(Equal(v1alpha1.ReasonRollingBack), "while rolling back: %s", r)
			}
		}
	})

	It("counts a stopped Prometheus as query errors, fails the gate only at errorThreshold, and passes it once Prometheus is back", func(ctx SpecContext) {
		const threshold = 4
		g, p, mon, op := newAnalyzedZones(ctx, 3, v1alpha1.FailurePause, func(p *promSetup) *v1alpha1.RolloutAnalysis {
			return p.analysis(0, errorRateCheck(func(c *v1alpha1.AnalysisCheck) {
				c.ErrorThreshold = threshold
				// Room for Prometheus to stop before zone-a's gate queries.
				c.InitialDelay = &metav1.Duration{Duration: 2 * time.Second}
			}))
		})
		timeline := g.recordGroup(ctx)

		g.setVersion(ctx, "v2")
		Eventually(func() int { return len(mon.Deletions()) }).Should(BeNumerically(">=", 1))
		Expect(p.prom.Stop()).To(Succeed())
		stopped := time.Now()

		rg := g.waitPhase(ctx, v1alpha1.PhaseFailed, time.Minute)
		Expect(readyReason(rg)).To(Equal(v1alpha1.ReasonAnalysisError))
		Expect(rg.Status.Analysis.Failure).To(And(HaveField("Reason", v1alpha1.ReasonAnalysisError), HaveField("Check", checkName)))
		Expect(rg.Status.Message).To(And(ContainSubstring("check error-rate: 4 consecutive query errors (errorThreshold 4)"),
			ContainSubstring("connection refused")))
		Expect(checkOf(Default, rg.Status.Analysis, checkName)).To(And(HaveField("Phase", v1alpha1.CheckErrored),
			HaveField("ConsecutiveErrors", int32(threshold)), HaveField("ConsecutiveFailures", BeZero()),
			HaveField("ConsecutiveSuccesses", BeZero()), HaveField("LastError", ContainSubstring("connection refused"))))
		Expect(g.eventsOf(ctx, "AnalysisError")).To(ConsistOf(And(HavePrefix("Warning: check error-rate: 4 consecutive query errors"),
			ContainSubstring("AfterMember gate of ingester-zone-a"))))
		Expect(g.eventReasons(ctx)).NotTo(HaveKey("GateFailed"), "errors are not failures")
		Eventually(func() map[string]float64 { return g.checkResults(op, checkName) }).Should(
			Equal(map[string]float64{"success": 0, "failure": 0, "error": threshold}))
		// Below the threshold the errors showed, and the group said it was
		// analyzing, not failing.
		var below []int32
		for _, r := range timeline.all() {
			st, ok := r.check(checkName)
			if !ok || r.gate() != "ingester-zone-a" {
				continue
			}
			Expect(st.ConsecutiveSuccesses).To(BeZero(), "zone-a's gate was queried before Prometheus stopped at %s: %s",
				stopped.Format(time.StampMilli), r)
			Expect(st.ConsecutiveFailures).To(BeZero(), "%s", r)
			if st.ConsecutiveErrors > 0 {
				below = append(below, st.ConsecutiveErrors)
				Expect(r.Phase).To(Equal(v1alpha1.PhaseAnalyzing), "%s", r)
				Expect(r.Reason).To(Equal(v1alpha1.ReasonWaitingForAnalysis), "%s", r)
				Expect(st.Phase).To(Equal(v1alpha1.CheckRunning), "%s", r)
				Expect(r.Message).To(ContainSubstring(fmt.Sprintf("%d errors, last: query Prometheus", st.ConsecutiveErrors)))
			}
		}
		AddReportEntry("consecutiveErrors shown below the threshold", fmt.Sprint(below))
		Expect(below).NotTo(BeEmpty(), "status never showed the errors below the threshold:\n%s", timeline)
		Expect(slices.IsSorted(below)).To(BeTrue(), "the errors only rise: %v", below)
		Expect(slices.Max(below)).To(BeNumerically("<", threshold))
		Expect(rollsOf(mon, "ingester-zone-b")).To(BeZero())

		// A higher threshold, and a retry with Prometheus still down: the gate
		// is evaluated from the start and goes past the old threshold without
		// failing, then passes once Prometheus answers again.
		g.updateSpec(ctx, func(s *v1alpha1.RolloutGroupSpec) { s.Analysis.Checks[0].ErrorThreshold = 1000 })
		retried := time.Now()
		g.annotate(ctx, v1alpha1.AnnotationRetry, "after-errors")
		// Counts reach status with the next progress write (every 10 s at most)
		// or when a check changes phase: the wait takes one progress write.
		Eventually(func(gm Gomega) {
			rg := g.get(ctx)
			gm.Expect(rg.Status.ObservedGeneration).To(Equal(rg.Generation))
			gm.Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseAnalyzing))
			gm.Expect(checkOf(gm, rg.Status.Analysis, checkName).ConsecutiveErrors).To(BeNumerically(">", threshold+1))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		var rising []int32
		for _, r := range timeline.all() {
			if st, ok := r.check(checkName); ok && r.At.After(retried) && r.gate() == "ingester-zone-a" && st.ConsecutiveErrors > 0 {
				rising = append(rising, st.ConsecutiveErrors)
				Expect(r.Phase).To(Equal(v1alpha1.PhaseAnalyzing), "%s", r)
				Expect(st.ConsecutiveFailures).To(BeZero(), "%s", r)
			}
		}
		AddReportEntry("consecutiveErrors shown after the retry, errorThreshold 1000", fmt.Sprint(rising))
		Expect(slices.IsSorted(rising)).To(BeTrue(), "the errors only rise: %v", rising)
		Expect(rollsOf(mon, "ingester-zone-b")).To(BeZero())
		Expect(p.prom.Start(ctx)).To(Succeed())
		restarted := time.Now()

		rg = g.waitComplete(ctx, time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		passed, ok := timeline.first(func(r groupRecord) bool {
			return r.At.After(restarted) && r.Analysis != nil && r.Analysis.Gate == nil && r.Analysis.Failure == nil
		})
		Expect(ok).To(BeTrue())
		AddReportEntry("Prometheus back to zone-a's gate passed", passed.At.Sub(restarted).Round(time.Millisecond).String())
		Expect(g.eventsOf(ctx, "GatePassed")).To(HaveLen(3))
		Expect(g.eventReasons(ctx)).To(HaveKeyWithValue("AnalysisError", 1), "no second error failure past the raised threshold")
		Expect(rg.Status.Analysis.Failure).To(BeNil())
	})

	It("reports refused credentials and bad PromQL as query errors naming the check", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		groupOf := func(name string) *zoneGroup {
			return &zoneGroup{ns: ns, name: name, replicas: 2, scaled: map[string]int32{}, zones: []string{name + "-zone-a"}}
		}
		creds, promql := groupOf("creds"), groupOf("promql")
		p := startPrometheus(ctx, []string{"creds-zone-a", "promql-zone-a"}, framework.WithBasicAuth())
		secret := func(name, password string) {
			Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				StringData: map[string]string{"username": framework.PrometheusUser, "password": password}})).To(Succeed())
		}
		secret("prometheus-wrong", "not-"+framework.PrometheusPassword)
		secret("prometheus", framework.PrometheusPassword)
		// The operator reads no Secret unless granted, namespace by namespace.
		Expect(cp.GrantAnalysisSecrets(ctx, operatorUser.Name, ns)).To(Succeed())
		withThreshold := func(c *v1alpha1.AnalysisCheck) { c.ErrorThreshold = 2 }
		for _, g := range []*zoneGroup{creds, promql} {
			g.createStatefulSets(ctx, nil)
		}
		creds.createGroup(ctx, func(s *v1alpha1.RolloutGroupSpec) {
			s.Analysis = p.analysis(0, errorRateCheck(withThreshold))
			s.Analysis.Prometheus.AuthSecretRef = &v1alpha1.LocalSecretReference{Name: "prometheus-wrong"}
		})
		// This group's checks run after every batch of pods: the first batch's
		// gate fails, and holds the second.
		afterBatch := func(c *v1alpha1.AnalysisCheck) { c.Gate, c.ErrorThreshold = v1alpha1.GateAfterBatch, 2 }
		promql.createGroup(ctx, func(s *v1alpha1.RolloutGroupSpec) {
			s.Analysis = p.analysis(0, errorRateCheck(afterBatch), errorRateCheck(func(c *v1alpha1.AnalysisCheck) {
				afterBatch(c)
				c.Name, c.Query = "broken-query", `sum(`+errorsQuery
			}))
			s.Analysis.Prometheus.AuthSecretRef = &v1alpha1.LocalSecretReference{Name: "prometheus"}
		})
		for _, g := range []*zoneGroup{creds, promql} {
			g.waitPodsOn(ctx, "v1")
		}
		startOperator(ctx, "echelon", ns, fastLeaderElection...)
		var mons []*framework.Monitor
		for _, g := range []*zoneGroup{creds, promql} {
			g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
			mons = append(mons, g.monitor(ctx))
		}
		p.waitScraped(ctx, 0, "creds-zone-a", "promql-zone-a")

		creds.setVersion(ctx, "v2")
		promql.setVersion(ctx, "v2")
		for _, g := range []*zoneGroup{creds, promql} {
			rg := g.waitPhase(ctx, v1alpha1.PhaseFailed, time.Minute)
			Expect(readyReason(rg)).To(Equal(v1alpha1.ReasonAnalysisError), "group %s", g.name)
		}

		rg := creds.get(ctx)
		refused := And(ContainSubstring("refused the credentials (HTTP 401 Unauthorized)"), ContainSubstring("authSecretRef"))
		Expect(rg.Status.Analysis.Failure).To(And(HaveField("Reason", v1alpha1.ReasonAnalysisError), HaveField("Check", checkName)))
		Expect(rg.Status.Message).To(And(HavePrefix("check error-rate: 2 consecutive query errors"), refused))
		Expect(checkOf(Default, rg.Status.Analysis, checkName)).To(And(HaveField("Phase", v1alpha1.CheckErrored),
			HaveField("LastError", refused), HaveField("ConsecutiveFailures", BeZero())))
		Expect(creds.eventsOf(ctx, "AnalysisError")).To(ConsistOf(And(HavePrefix("Warning: check error-rate:"), refused)))

		rg = promql.get(ctx)
		badQuery := ContainSubstring("Prometheus refused the query (bad PromQL)")
		Expect(rg.Status.Analysis.Failure).To(And(HaveField("Reason", v1alpha1.ReasonAnalysisError), HaveField("Check", "broken-query")))
		Expect(rg.Status.Message).To(And(HavePrefix("check broken-query: 2 consecutive query errors"), badQuery,
			ContainSubstring("AfterBatch gate of promql-zone-a")))
		Expect(rollsOf(mons[1], "promql-zone-a")).To(Equal(1), "the failed gate of the first batch holds the second")
		Expect(checkOf(Default, rg.Status.Analysis, "broken-query")).To(And(HaveField("Phase", v1alpha1.CheckErrored),
			HaveField("LastError", badQuery), HaveField("ConsecutiveFailures", BeZero()),
			HaveField("Query", `sum(echelon_e2e_errors{zone="promql-zone-a"}`)))
		// The same server with the right password answers the group's other check.
		Expect(checkOf(Default, rg.Status.Analysis, checkName)).To(And(HaveField("Phase", v1alpha1.CheckPassed),
			HaveField("LastValue", "0"), HaveField("LastError", "")))
		Expect(promql.eventsOf(ctx, "AnalysisError")).To(ConsistOf(And(HavePrefix("Warning: check broken-query:"), badQuery)))
		for _, g := range []*zoneGroup{creds, promql} {
			Expect(g.eventReasons(ctx)).NotTo(HaveKey("GateFailed"), "errors are not failures")
		}

		// Fixing the Secret and retrying passes the gate: the operator reads
		// the credentials again.
		wrong := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "prometheus-wrong"}, wrong)).To(Succeed())
		wrong.Data["password"] = []byte(framework.PrometheusPassword)
		Expect(k8s.Update(ctx, wrong)).To(Succeed())
		creds.annotate(ctx, v1alpha1.AnnotationRetry, "fixed-secret")
		creds.waitComplete(ctx, time.Minute)
		for _, mon := range mons {
			expectNoBreaches(mon)
		}
	})

	It("skips a gate, aborts a rollout (onFailure Pause) and retries, all from kubectl", func(ctx SpecContext) {
		// Every zone's metric is bad, and the failure threshold out of reach:
		// the gates would hold for ever.
		g, p, mon, _ := newAnalyzedZones(ctx, 3, v1alpha1.FailurePause, func(p *promSetup) *v1alpha1.RolloutAnalysis {
			return p.analysis(0, errorRateCheck(func(c *v1alpha1.AnalysisCheck) { c.FailureThreshold = 1000 }))
		})
		stable := g.updateRevisions(ctx)
		for _, z := range g.zones {
			p.setErrors(z, badErrors)
		}
		p.waitScraped(ctx, badErrors, g.zones...)

		g.setVersion(ctx, "v2")
		waitGate := func(member string) {
			GinkgoHelper()
			Eventually(func(gm Gomega) {
				rg := g.get(ctx)
				gm.Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseAnalyzing))
				gm.Expect(rg.Status.Analysis).To(HaveField("Gate", HaveField("Member", member)))
				gm.Expect(checkOf(gm, rg.Status.Analysis, checkName)).To(And(HaveField("Phase", v1alpha1.CheckRunning),
					HaveField("LastValue", "5"), HaveField("ConsecutiveFailures", BeNumerically(">=", 1))))
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		}
		holds := func(member string) {
			GinkgoHelper()
			Consistently(func() int { return rollsOf(mon, member) }).WithTimeout(2*time.Second).Should(BeZero(),
				"the gate holds %s back", member)
		}
		waitGate("ingester-zone-a")
		holds("ingester-zone-b")

		g.annotate(ctx, v1alpha1.AnnotationSkipGate, "skip-a")
		Eventually(func() []string { return g.eventsOf(ctx, "GateSkipped") }).Should(ConsistOf(And(
			HavePrefix("Normal: echelon.dev/skip-gate=skip-a: AfterMember gate of ingester-zone-a "), HaveSuffix(" passed by hand"))))
		// The annotation stays, with the value already acted on: zone-b's gate
		// holds.
		waitGate("ingester-zone-b")
		holds("ingester-zone-c")
		Expect(g.get(ctx).Status.Analysis.HandledSkip).To(Equal("skip-a"))

		g.annotate(ctx, v1alpha1.AnnotationAbort, "abort-1")
		rg := g.waitPhase(ctx, v1alpha1.PhaseFailed, time.Minute)
		Expect(readyReason(rg)).To(Equal(v1alpha1.ReasonAborted))
		Expect(rg.Status.Analysis.Failure).To(HaveField("Message", "rollback requested with echelon.dev/abort=abort-1"))
		Expect(rg.Status.Analysis.HandledAbort).To(Equal("abort-1"))
		Expect(rg.Status.Analysis.Rollback.CompletionTime).NotTo(BeNil())
		g.waitPodsOn(ctx, "v1")
		g.expectPodsOnRevisions(ctx, stable)
		Expect(mon.DeletionsWhere(versionAnnotation, "v2")).To(HaveLen(6))
		Expect(mon.DeletionsWhere(versionAnnotation, "v2")[0].Member).To(Equal("ingester-zone-b"), "the most recently rolled zone comes back first")
		Expect(rollsOf(mon, "ingester-zone-c")).To(BeZero())
		Eventually(func() map[string]int { return g.eventReasons(ctx) }).Should(And(
			HaveKeyWithValue("AbortRequested", 1), HaveKeyWithValue("RollbackStarted", 1), HaveKeyWithValue("RollbackComplete", 1)))

		// Retry after the rollback: the group goes on with the templates as
		// they are, the stable ones, so it is complete.
		g.annotate(ctx, v1alpha1.AnnotationRetry, "retry-1")
		rg = g.waitComplete(ctx, time.Minute)
		Expect(rg.Status.Analysis.HandledRetry).To(Equal("retry-1"))
		Expect(rg.Status.Analysis.Failure).To(BeNil())
		Expect(rg.Status.Analysis.Rollback).To(BeNil())
		Expect(g.eventsOf(ctx, "RetryRequested")).To(ConsistOf(ContainSubstring("failure and rollback cleared")))
		expectNoBreaches(mon)
	})
})
