package e2e

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
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

var _ = Describe("echelon migrate from the Grafana rollout-operator", func() {
	It("translates a namespace labelled the Grafana way and applies it; the group rolls under the pod monitor, followers follow, and the patches remove the keys", func(ctx SpecContext) {
		g := newZones(ctx, 2)
		g.createStatefulSets(ctx, func(sts *appsv1.StatefulSet) {
			sts.Labels["rollout-group"] = "ingester"
			sts.Labels["grafana.com/min-time-between-zones-downscale"] = "1m"
			sts.Annotations = map[string]string{"rollout-max-unavailable": "2"}
			if sts.Name != "ingester-zone-a" {
				sts.Annotations["grafana.com/rollout-downscale-leader"] = "ingester-zone-a"
			}
		})
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

		By("scaling the leader up: the followers follow")
		g.scale(ctx, "ingester-zone-a", 3)
		g.scaled["ingester-zone-b"], g.scaled["ingester-zone-c"] = 3, 3
		Eventually(func(gm Gomega) {
			for _, z := range []string{"ingester-zone-b", "ingester-zone-c"} {
				sts := &appsv1.StatefulSet{}
				gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: z}, sts)).To(Succeed())
				gm.Expect(*sts.Spec.Replicas).To(BeEquivalentTo(3), z)
			}
		}).WithContext(ctx).Should(Succeed())
		g.waitPodsOn(ctx, "v1")

		By("rolling the group, two pods at a time, one zone at a time")
		mon := g.monitor(ctx)
		g.setVersion(ctx, "v2")
		g.waitComplete(ctx, 2*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)

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
