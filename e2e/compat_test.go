package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/grafanacompat"
	"github.com/echelon-operator/echelon/internal/migrate"
	"github.com/echelon-operator/echelon/test/builders"
)

// runMigrate runs `echelon migrate` as a person would, with the admin's
// kubeconfig, and returns its exit code, standard output and standard error.
func runMigrate(args ...string) (int, string, string) {
	GinkgoHelper()
	cmd := exec.Command(operatorBin, append([]string{"migrate", "--kubeconfig=" + cp.Kubeconfig()}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); cmd.ProcessState == nil {
		Expect(err).NotTo(HaveOccurred(), "start echelon migrate")
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// labelTheGrafanaWay puts a zone of ingester in rollout-group ingester, two
// pods at a time, zones b and c following zone a with a zone delay of a
// minute.
func labelTheGrafanaWay(sts *appsv1.StatefulSet) { labelWithZoneDelay("1m")(sts) }

// labelWithZoneDelay is labelTheGrafanaWay with another zone delay.
func labelWithZoneDelay(delay string) func(*appsv1.StatefulSet) {
	return func(sts *appsv1.StatefulSet) {
		sts.Labels["rollout-group"] = "ingester"
		sts.Labels["grafana.com/min-time-between-zones-downscale"] = delay
		sts.Annotations = map[string]string{"rollout-max-unavailable": "2"}
		if sts.Name != zoneA {
			sts.Annotations["grafana.com/rollout-downscale-leader"] = zoneA
		}
	}
}

// scaleLeaderAndWaitForFollowers scales zone a of g to replicas and waits
// until zones b and c follow and every pod is Ready on version.
func scaleLeaderAndWaitForFollowers(ctx SpecContext, g *zoneGroup, replicas int32, version string) {
	GinkgoHelper()
	g.scale(ctx, "ingester-zone-a", replicas)
	g.scaled["ingester-zone-b"], g.scaled["ingester-zone-c"] = replicas, replicas
	Eventually(func(gm Gomega) {
		for _, z := range []string{"ingester-zone-b", "ingester-zone-c"} {
			sts := &appsv1.StatefulSet{}
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: z}, sts)).To(Succeed())
			gm.Expect(*sts.Spec.Replicas).To(Equal(replicas), z)
		}
	}).WithContext(ctx).Should(Succeed())
	g.waitPodsOn(ctx, version)
}

// scaleThenRoll checks, on a group labelled the Grafana way and handed to
// Echelon, that the followers follow the leader up, then that v2 rolls under
// the pod monitor.
func scaleThenRoll(ctx SpecContext, g *zoneGroup) {
	GinkgoHelper()
	By("scaling the leader up: the followers follow")
	scaleLeaderAndWaitForFollowers(ctx, g, 3, "v1")
	By("rolling the group, two pods at a time, one zone at a time")
	rollUnderMonitor(ctx, g, "v2")
}

// rollUnderMonitor rolls g to version while the pod monitor watches for any
// breach of the guarantees.
func rollUnderMonitor(ctx SpecContext, g *zoneGroup, version string) {
	GinkgoHelper()
	mon := g.monitor(ctx)
	g.setVersion(ctx, version)
	g.waitComplete(ctx, 2*time.Minute)
	g.waitPodsOn(ctx, version)
	expectNoBreaches(mon)
}

var _ = Describe("echelon migrate from the Grafana rollout-operator", func() {
	It("translates a namespace labelled the Grafana way and applies it; the group rolls under the pod monitor, followers follow, and the patches remove the keys", func(ctx SpecContext) {
		g := newZones(ctx, 2)
		g.createStatefulSets(ctx, labelTheGrafanaWay)
		g.waitPodsOn(ctx, "v1")

		By("applying the translation after a dry run, twice: the second changes nothing")
		dir := GinkgoT().TempDir()
		code, stdout, stderr := runMigrate("--namespace="+g.ns, "--output-dir="+dir, "--apply")
		Expect(code).To(Equal(0), "stdout: %s\nstderr: %s", stdout, stderr)
		Expect(stdout).To(ContainSubstring("create RolloutGroup " + g.ns + "/ingester\n"))
		Expect(stdout).To(ContainSubstring("applied RolloutGroup " + g.ns + "/ingester\n"))
		Expect(stderr).To(ContainSubstring("# 1 RolloutGroups, 3 ScalingPolicies, 0 DelayedDownscales, 0 ZoneDisruptionBudgets, 3 patches"))
		code, stdout, stderr = runMigrate("--namespace="+g.ns, "--apply")
		Expect(code).To(Equal(0), "stderr: %s", stderr)
		Expect(stdout).To(ContainSubstring("unchanged RolloutGroup " + g.ns + "/ingester\n"))
		Expect(stdout).To(ContainSubstring("unchanged ScalingPolicy " + g.ns + "/ingester-zone-b\n"))

		rg := g.get(ctx)
		Expect(rg.Spec.StatefulSets).To(HaveLen(3))
		Expect(rg.Spec.MaxUnavailable).To(Equal(new(intstr.FromInt32(2))))
		sp := &v1alpha1.ScalingPolicy{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: "ingester-zone-c"}, sp)).To(Succeed())
		Expect(sp.Spec.ReplicasFrom.Leader.Name).To(Equal("ingester-zone-a"))
		Expect(sp.Spec.MinTimeBetweenZoneDownscales.Duration).To(Equal(time.Minute))

		startOperator(ctx, "migrate", g.ns)

		scaleThenRoll(ctx, g)

		By("running the patches: the translated keys are gone, the pod templates untouched")
		script, err := os.ReadFile(filepath.Join(dir, "patches.sh"))
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Count(string(script), "kubectl -n "+g.ns+" patch statefulset")).To(Equal(3))
		sh := exec.CommandContext(ctx, "sh", filepath.Join(dir, "patches.sh"))
		sh.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig(), "PATH="+filepath.Dir(cp.Assets().Kubectl)+":"+os.Getenv("PATH"))
		out, err := sh.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		for _, z := range g.zones {
			sts := &appsv1.StatefulSet{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: z}, sts)).To(Succeed())
			Expect(sts.Labels).NotTo(HaveKey("rollout-group"))
			Expect(sts.Labels).NotTo(HaveKey("grafana.com/min-time-between-zones-downscale"))
			Expect(sts.Annotations).To(BeEmpty())
			Expect(sts.Spec.Template.Annotations).To(HaveKeyWithValue(versionAnnotation, "v2"))
		}
		Expect(g.get(ctx).Status.Phase).To(Equal(v1alpha1.PhaseComplete))
		code, _, stderr = runMigrate("--namespace=" + g.ns)
		Expect(code).To(Equal(0))
		Expect(stderr).To(HavePrefix("# 0 RolloutGroups, 0 ScalingPolicies"), "nothing left to translate")
	})

	It("writes resources the API server accepts for every golden input, percentages, regexes and durations included", func(ctx SpecContext) {
		inputs, err := filepath.Glob(filepath.Join("..", "internal", "migrate", "testdata", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(inputs).NotTo(BeEmpty())
		ns := newNamespace(ctx)
		created := 0
		for _, input := range inputs {
			code, stdout, stderr := runMigrate("-f", input, "--namespace=from-flag")
			Expect(code).To(BeElementOf(0, 3), "%s: %s", input, stderr)
			dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stdout), 4096)
			for {
				obj := &unstructured.Unstructured{}
				if err := dec.Decode(&obj.Object); err != nil {
					Expect(err).To(MatchError(io.EOF))
					break
				}
				obj.SetNamespace(ns) // one namespace for all: names do not collide within a fixture, and each is a dry run
				Expect(k8s.Create(ctx, obj, client.DryRunAll)).To(Succeed(), "%s: %s %s", input, obj.GetKind(), obj.GetName())
				created++
			}
		}
		Expect(created).To(BeNumerically(">=", 19), "the golden files hold 19 resources")
	})
})

var _ = Describe("Grafana compat mode", func() {
	It("rolls a group labelled the Grafana way under the pod monitor, followers follow, and a RolloutGroup of the user's takes over with a Warning", func(ctx SpecContext) {
		g := newZones(ctx, 2)
		g.createStatefulSets(ctx, labelTheGrafanaWay)
		g.waitPodsOn(ctx, "v1")
		startOperator(ctx, "compat", g.ns, "--grafana-compat")

		By("keeping the translated resources, labelled as compat mode's")
		Eventually(func(gm Gomega) {
			rg := &v1alpha1.RolloutGroup{}
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: "ingester"}, rg)).To(Succeed())
			gm.Expect(rg.Labels).To(HaveKeyWithValue(v1alpha1.GrafanaCompatLabel, "true"))
			gm.Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseComplete))
		}).WithContext(ctx).Should(Succeed())

		scaleThenRoll(ctx, g)

		By("a RolloutGroup of the user's over the same StatefulSets: it wins, compat mode's goes, a Warning says why")
		mine := builders.MakeRolloutGroup(g.ns, "ingester-mine").Members(g.zones...).Obj()
		Expect(k8s.Create(ctx, mine)).To(Succeed())
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: "ingester"}, &v1alpha1.RolloutGroup{})
		}).WithContext(ctx).Should(Satisfy(apierrors.IsNotFound))
		Eventually(func(gm Gomega) {
			var events corev1.EventList
			gm.Expect(k8s.List(ctx, &events, client.InNamespace(g.ns))).To(Succeed())
			gm.Expect(events.Items).To(ContainElement(And(
				HaveField("Reason", grafanacompat.ReasonOverridden),
				HaveField("InvolvedObject.Name", "ingester-zone-a"),
				HaveField("Type", corev1.EventTypeWarning))))
		}).WithContext(ctx).Should(Succeed())
		g.name = "ingester-mine"
		g.waitComplete(ctx, time.Minute)

		By("the user's group rolls the next change, one pod at a time as it says")
		rollUnderMonitor(ctx, g, "v3")
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: "ingester"}, &v1alpha1.RolloutGroup{})).To(Satisfy(apierrors.IsNotFound), "compat mode must not bring its group back")
	})
	It("refuses, through the API server, kubectl scale down of a StatefulSet labelled grafana.com/no-downscale, lets it grow, and lets it shrink once the label is gone", func(ctx SpecContext) {
		g := newZones(ctx, 3)
		g.zones = g.zones[:1]
		g.createStatefulSets(ctx, func(sts *appsv1.StatefulSet) { sts.Labels["grafana.com/no-downscale"] = "true" })
		startWebhookOperator(ctx, "compat", g.ns, "--grafana-compat")
		guarded := g.zones[0]
		Eventually(func(gm Gomega) {
			sp := &v1alpha1.ScalingPolicy{}
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: guarded}, sp)).To(Succeed())
			gm.Expect(sp.Labels).To(HaveKeyWithValue(v1alpha1.GrafanaCompatLabel, "true"))
			gm.Expect(sp.Spec.DownscaleAllowed()).To(BeFalse())
			gm.Expect(sp.Status.ObservedGeneration).To(Equal(sp.Generation), "the operator has seen the policy")
		}).WithContext(ctx).Should(Succeed())

		out, ok := scaleWithKubectl(ctx, g.ns, "StatefulSet", guarded, 2)
		Expect(ok).To(BeFalse(), "kubectl scale down was admitted: %s", out)
		Expect(out).To(ContainSubstring("ScalingPolicy " + guarded))
		out, ok = scaleWithKubectl(ctx, g.ns, "StatefulSet", guarded, 4)
		Expect(ok).To(BeTrue(), out)

		By("removing the label: compat mode deletes its policy, and the downscale is admitted")
		patchStatefulSet(ctx, g.ns, guarded, `{"metadata":{"labels":{"grafana.com/no-downscale":null}}}`)
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: guarded}, &v1alpha1.ScalingPolicy{})
		}).WithContext(ctx).Should(Satisfy(apierrors.IsNotFound))
		Eventually(func() bool {
			_, ok := scaleWithKubectl(ctx, g.ns, "StatefulSet", guarded, 2)
			return ok
		}).WithContext(ctx).Should(BeTrue(), "the webhook's cache sees the policy gone")
	})
	It("delays a downscale of a StatefulSet following a reference resource with the Grafana annotations, preparing each removed pod over the protocol first", func(ctx SpecContext) {
		const delay = 3 * time.Second
		g := newZones(ctx, 5)
		g.zones = g.zones[:1]
		pods := startPreparePods()
		Expect(k8s.Create(ctx, newDeployment(g.ns, "ref", 5))).To(Succeed())
		g.createStatefulSets(ctx, func(sts *appsv1.StatefulSet) {
			sts.Annotations = map[string]string{
				"grafana.com/rollout-mirror-replicas-from-resource-api-version": "apps/v1",
				"grafana.com/rollout-mirror-replicas-from-resource-kind":        "Deployment",
				"grafana.com/rollout-mirror-replicas-from-resource-name":        "ref",
				"grafana.com/rollout-mirror-replicas-from-resource-write-back":  "false",
				"grafana.com/rollout-delayed-downscale":                         "3s",
				"grafana.com/rollout-prepare-delayed-downscale-url":             fmt.Sprintf("http://pod:%d%s", pods.port, preparePath),
			}
		})
		g.waitPodsOn(ctx, "v1")
		Eventually(func(gm Gomega) {
			var list corev1.PodList
			gm.Expect(k8s.List(ctx, &list, client.InNamespace(g.ns))).To(Succeed())
			gm.Expect(list.Items).To(HaveLen(10))
			for _, p := range list.Items {
				gm.Expect(p.Status.PodIP).NotTo(BeEmpty(), p.Name)
			}
		}).WithContext(ctx).Should(Succeed())
		pods.learnPods(ctx, g.ns)
		s := &delayedSetup{zoneGroup: g, sts: g.zones[0], pods: pods, rec: recordReplicas(ctx, g.ns)}
		startOperator(ctx, "compat", g.ns, append(delayedOperatorFlags, "--grafana-compat")...)
		s.waitDelayed(ctx, time.Minute, idleAt(5))

		kubectl(ctx, "-n", g.ns, "scale", "deployment/ref", "--replicas=2")
		s.finish(ctx, 2)
		changes := s.rec.of(s.sts)
		s.pods.expectShrunkOnlyPastEligible(changes, s.sts, delay)
		for _, ord := range []int{2, 3, 4} {
			Expect(s.pods.callsTo(s.pod(ord), http.MethodPost)).NotTo(BeEmpty(), "%s was asked to prepare", s.pod(ord))
		}
	})
	It("downscales the followers of a leader one zone at a time, the Grafana zone delay apart", func(ctx SpecContext) {
		const delay = 5 * time.Second
		g := newZones(ctx, 3)
		g.createStatefulSets(ctx, labelWithZoneDelay("5s"))
		g.waitPodsOn(ctx, "v1")
		rec := recordReplicas(ctx, g.ns)
		startOperator(ctx, "compat", g.ns, "--grafana-compat")
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: zoneC}, &v1alpha1.ScalingPolicy{})
		}).WithContext(ctx).Should(Succeed())
		waitStable(ctx, g.ns, zoneB, zoneC)

		g.scale(ctx, zoneA, 2)
		b := rec.waitChange(ctx, zoneB, 2, 30*time.Second)
		c := rec.waitChange(ctx, zoneC, 2, 30*time.Second)
		apart := c.At.Sub(b.At).Abs()
		Expect(apart).To(BeNumerically(">=", delay), "the followers scaled down %s apart; the zone delay is %s", apart, delay)
	})
	It("answers the Grafana operator's webhook configurations unchanged: injects its CA, refuses through them a downscale of a grafana.com/no-downscale StatefulSet, an eviction past a ZoneAwarePodDisruptionBudget and an invalid budget", func(ctx SpecContext) {
		installZPDBCRD(ctx)
		Expect(cp.GrantGrafanaCompat(ctx, operatorUser.Name)).To(Succeed())
		g := newZones(ctx, 2)
		g.createStatefulSets(ctx, func(sts *appsv1.StatefulSet) {
			labelTheGrafanaWay(sts)
			sts.Spec.Template.Labels["name"] = "ingester"
			if sts.Name == zoneA {
				sts.Labels["grafana.com/no-downscale"] = "true"
			}
		})
		Expect(createZPDB(ctx, g.ns, "ingester", map[string]any{"maxUnavailable": 1, "selector": map[string]any{"matchLabels": map[string]any{"name": "ingester"}}})).To(Succeed())
		g.waitPodsOn(ctx, "v1")
		w := startWebhookServer(ctx, "compat", g.ns, "--grafana-compat")
		installGrafanaWebhookConfigurations(ctx, g.ns, w.port)

		By("translating the ZoneAwarePodDisruptionBudget into the group's disruption budget")
		Eventually(func(gm Gomega) {
			rg := &v1alpha1.RolloutGroup{}
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: "ingester"}, rg)).To(Succeed())
			gm.Expect(rg.Labels).To(HaveKeyWithValue(v1alpha1.GrafanaCompatLabel, "true"))
			gm.Expect(rg.Spec.DisruptionBudget).NotTo(BeNil())
			gm.Expect(rg.Spec.DisruptionBudget.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))))
			gm.Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseComplete))
			sp := &v1alpha1.ScalingPolicy{}
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: zoneA}, sp)).To(Succeed())
			gm.Expect(sp.Spec.DownscaleAllowed()).To(BeFalse())
			gm.Expect(sp.Status.ObservedGeneration).To(Equal(sp.Generation), "the operator has seen the policy")
		}).WithContext(ctx).Should(Succeed())
		Expect(hasMetricLine(w, "echelon_grafana_compat_objects", `kind="RolloutGroup"`, `namespace="`+g.ns+`"`, "} 1")).To(BeTrue())

		By("refusing kubectl scale down of the no-downscale StatefulSet through the Grafana no-downscale configuration")
		out, ok := scaleWithKubectl(ctx, g.ns, "StatefulSet", zoneA, 1)
		Expect(ok).To(BeFalse(), "kubectl scale down was admitted: %s", out)
		Expect(out).To(And(ContainSubstring("no-downscale-"+g.ns+".grafana.com"), ContainSubstring("ScalingPolicy "+zoneA)))

		By("refusing, through the Grafana pod-eviction configuration, an eviction in zone c while a pod of zone b is down")
		g.setPodReady(ctx, zoneB+"-0", false)
		Eventually(func() bool { return apierrors.IsTooManyRequests(evict(ctx, g.ns, zoneC+"-0", true)) }).
			WithContext(ctx).Should(BeTrue(), "a dry run is refused once the webhook sees zone b short")
		err := evict(ctx, g.ns, zoneC+"-0", false)
		Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "want 429, got %v", err)
		Expect(err.Error()).To(And(ContainSubstring("RolloutGroup ingester"), ContainSubstring(zoneB)), "the refusal names the budget and the zone that is down")
		Expect(hasMetricLine(w, "echelon_webhook_requests_total", `webhook="pod-eviction"`, `decision="denied"`)).To(BeTrue(), "the alias is counted under its own name")
		g.setPodReady(ctx, zoneB+"-0", true)
		Eventually(func() error { return evict(ctx, g.ns, zoneC+"-0", false) }).WithContext(ctx).Should(Succeed(), "admitted once zone b is whole")

		By("refusing an invalid ZoneAwarePodDisruptionBudget through the Grafana zpdb-validation configuration, naming the field")
		err = createZPDB(ctx, g.ns, "bad", map[string]any{"maxUnavailable": -1, "selector": map[string]any{"matchLabels": map[string]any{"name": "ingester"}}})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(And(ContainSubstring("zpdb-validation-"+g.ns+".grafana.com"), ContainSubstring("spec.maxUnavailable"), ContainSubstring("-1 is negative")))

		By("following a change of the ZoneAwarePodDisruptionBudget, seen through its watch")
		zpdb := zpdbGVK(migrate.ZoneAwarePDBKind)
		zpdb.SetNamespace(g.ns)
		zpdb.SetName("ingester")
		Expect(k8s.Patch(ctx, zpdb, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"maxUnavailable":2}}`)))).To(Succeed())
		Eventually(func(gm Gomega) {
			rg := &v1alpha1.RolloutGroup{}
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: "ingester"}, rg)).To(Succeed())
			gm.Expect(rg.Spec.DisruptionBudget).NotTo(BeNil())
			gm.Expect(rg.Spec.DisruptionBudget.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(2))))
		}).WithContext(ctx).Should(Succeed())
	})
	It("counts the grafana.com/last-downscale of a zone the Grafana operator downscaled as its last downscale, so the zone delay holds across the handover", func(ctx SpecContext) {
		g := newZones(ctx, 3)
		g.zones = g.zones[:2]
		// The Grafana operator downscaled the leader a minute before it stopped.
		downscaled := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
		g.createStatefulSets(ctx, func(sts *appsv1.StatefulSet) {
			labelWithZoneDelay("1h")(sts)
			if sts.Name == zoneA {
				sts.Annotations[migrate.LastDownscaleAnnotation] = migrate.FormatLastDownscale(downscaled)
			}
		})
		g.waitPodsOn(ctx, "v1")
		startOperator(ctx, "compat", g.ns, "--grafana-compat")
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: zoneB}, &v1alpha1.ScalingPolicy{})
		}).WithContext(ctx).Should(Succeed())
		waitStable(ctx, g.ns, zoneB)

		By("the follower waits for the zone delay after the leader's recorded downscale")
		g.scale(ctx, zoneA, 2)
		sp := waitPolicy(ctx, g.ns, zoneB, v1alpha1.ScalingPhaseWaiting, v1alpha1.ScalingReasonZoneDelay, time.Minute)
		Expect(sp.Status.Message).To(ContainSubstring("StatefulSet " + zoneA))
		Expect(sp.Status.WaitingUntil).NotTo(BeNil())
		Expect(sp.Status.WaitingUntil.Time).To(BeTemporally(">=", downscaled.Add(time.Hour)), "the delay counts from the annotation")
		follower := &appsv1.StatefulSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: zoneB}, follower)).To(Succeed())
		Expect(*follower.Spec.Replicas).To(Equal(int32(3)), "the follower has not shrunk")

		By("once the recorded downscale is older than the delay, the follower follows and records its own downscale the Grafana way")
		patchStatefulSet(ctx, g.ns, zoneA, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, migrate.LastDownscaleAnnotation,
			migrate.FormatLastDownscale(time.Now().Add(-2*time.Hour))))
		before := time.Now().Add(-time.Second)
		Eventually(func(gm Gomega) {
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: zoneB}, follower)).To(Succeed())
			gm.Expect(*follower.Spec.Replicas).To(Equal(int32(2)))
		}).WithContext(ctx).Should(Succeed())
		at, err := migrate.LastDownscaleOf(follower)
		Expect(err).NotTo(HaveOccurred())
		Expect(at).To(BeTemporally(">=", before.Truncate(time.Second)), "compat mode wrote %s on the follower it downscaled", migrate.LastDownscaleAnnotation)
		Eventually(func(gm Gomega) {
			var events corev1.EventList
			gm.Expect(k8s.List(ctx, &events, client.InNamespace(g.ns))).To(Succeed())
			gm.Expect(events.Items).To(ContainElement(And(
				HaveField("InvolvedObject.Kind", "ScalingPolicy"),
				HaveField("InvolvedObject.Name", zoneB),
				HaveField("Message", HaveSuffix("(from Grafana annotations)")))), "the scale's Event says where it came from")
		}).WithContext(ctx).Should(Succeed())
	})
})
