package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
)

// kubectlEchelon runs the plugin as the control plane's admin, or with the
// kubeconfig given first as "--kubeconfig=...".
func kubectlEchelon(args ...string) framework.PluginRun {
	GinkgoHelper()
	if len(args) == 0 || !strings.HasPrefix(args[0], "--kubeconfig=") {
		args = append([]string{"--kubeconfig=" + cp.Kubeconfig()}, args...)
	}
	run, err := framework.RunPlugin(pluginBin, os.Environ(), args...)
	Expect(err).NotTo(HaveOccurred())
	return run
}

// plugin runs the plugin in the group's namespace.
func (g *zoneGroup) plugin(args ...string) framework.PluginRun {
	GinkgoHelper()
	return kubectlEchelon(append(args, "--namespace="+g.ns)...)
}

// expectRefused checks that a run failed as a user must see it: exit code
// 1, nothing on stdout, one line on stderr saying why.
func expectRefused(run framework.PluginRun, why string) {
	GinkgoHelper()
	Expect(run.Code).To(Equal(1), "stdout: %s\nstderr: %s", run.Stdout, run.Stderr)
	Expect(run.Stdout).To(BeEmpty())
	Expect(strings.TrimSuffix(run.Stderr, "\n")).NotTo(ContainSubstring("\n"), "one line")
	Expect(run.Stderr).To(HavePrefix("error: "))
	Expect(run.Stderr).To(ContainSubstring(why))
}

// expectDone checks that a control succeeded and said what it did in one line.
func expectDone(run framework.PluginRun, did string) {
	GinkgoHelper()
	Expect(run.Code).To(Equal(0), "stderr: %s", run.Stderr)
	Expect(strings.Count(run.Stdout, "\n")).To(Equal(1), "one line: %s", run.Stdout)
	Expect(run.Stdout).To(ContainSubstring(did))
}

// unreachableGates gates every member on a check of a Prometheus that never
// answers, with an errorThreshold no spec reaches: each AfterMember gate
// stays pending until it is skipped.
func unreachableGates(spec *v1alpha1.RolloutGroupSpec) {
	spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	spec.Analysis = &v1alpha1.RolloutAnalysis{
		Prometheus: &v1alpha1.PrometheusSource{Address: "http://127.0.0.1:1"},
		Checks: []v1alpha1.AnalysisCheck{{
			Name: "never-answers", Query: "up", Condition: v1alpha1.CheckCondition{HasData: ptr.To(true)},
			Interval: &metav1.Duration{Duration: time.Second}, ErrorThreshold: 1000, Gate: v1alpha1.GateAfterMember,
		}},
	}
}

// waitAnalysis waits until the group's analysis status meets check.
func (g *zoneGroup) waitAnalysis(ctx context.Context, check func(Gomega, *v1alpha1.RolloutGroup)) *v1alpha1.RolloutGroup {
	GinkgoHelper()
	var rg *v1alpha1.RolloutGroup
	Eventually(func(gm Gomega) {
		rg = &v1alpha1.RolloutGroup{}
		gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: g.name}, rg)).To(Succeed())
		gm.Expect(rg.Status.Analysis).NotTo(BeNil(), "status.analysis")
		check(gm, rg)
	}).WithContext(ctx).Should(Succeed())
	return rg
}

// tmuxScreen is a detached tmux session of its own server, 200x50, running
// one command: what a user's terminal shows.
type tmuxScreen struct {
	socket, session string
}

func startTmux(name, command string) *tmuxScreen {
	GinkgoHelper()
	t := &tmuxScreen{socket: "echelon-e2e-" + name, session: "watch"}
	Expect(t.tmux("new-session", "-d", "-x", "200", "-y", "50", "-s", t.session, command)).Error().NotTo(HaveOccurred())
	DeferCleanup(func() { _, _ = t.tmux("kill-server") })
	return t
}

func (t *tmuxScreen) tmux(args ...string) (string, error) {
	cmd := exec.Command("tmux", append([]string{"-L", t.socket}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("tmux %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// capture is the screen's text; with escapes, its colours too.
func (t *tmuxScreen) capture(escapes bool) string {
	GinkgoHelper()
	args := []string{"capture-pane", "-p", "-t", t.session}
	if escapes {
		args = append(args, "-e")
	}
	out, err := t.tmux(args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

var (
	rollingMember = regexp.MustCompile(`[├└]─ (ingester-zone-[abc])\s+Rolling\b`)
	waitingLine   = regexp.MustCompile(`(?m)^Waiting for:\s+(.*?)(?: \(since [^)]*\))?\s*$`)
)

// screenFacts are what a test reads off one screen of `get rg --watch`.
type screenFacts struct {
	rolling string
	waiting string
	phase   string
}

func factsOf(screen string) screenFacts {
	var f screenFacts
	if m := rollingMember.FindStringSubmatch(screen); m != nil {
		f.rolling = m[1]
	}
	if m := waitingLine.FindStringSubmatch(screen); m != nil {
		f.waiting = m[1]
	}
	if m := regexp.MustCompile(`(?m)^Phase:\s+(\w+)`).FindStringSubmatch(screen); m != nil {
		f.phase = m[1]
	}
	return f
}

// recordScreens captures the screen every 100ms until done says it is the
// last one or the timeout, and returns every distinct screen in order.
func recordScreens(t *tmuxScreen, timeout time.Duration, done func(string) bool) []string {
	GinkgoHelper()
	var screens []string
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		s := t.capture(false)
		if len(screens) == 0 || screens[len(screens)-1] != s {
			screens = append(screens, s)
		}
		if done(s) {
			return screens
		}
		time.Sleep(100 * time.Millisecond)
	}
	Fail(fmt.Sprintf("the screen did not reach its end within %s; last screen:\n%s", timeout, screens[len(screens)-1]))
	return nil
}

// expectNothingBelowTheTree checks that a frame ends with its tree: past the
// last member's row only that member's pod rows, then blank lines. A frame
// drawn over a longer one without clearing would leave the longer one's
// rows there.
func expectNothingBelowTheTree(lines []string, screen string) {
	GinkgoHelper()
	last := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "└─ ") })
	Expect(last).To(BeNumerically(">=", 0), "the tree's last member:\n%s", screen)
	for _, l := range lines[last+1:] {
		if strings.TrimSpace(l) != "" {
			Expect(l).To(HavePrefix("   "), "a row below the tree, left from an earlier frame:\n%s", screen)
		}
	}
	Expect(strings.Count(screen, "\nName:")+strings.Count(screen[:min(len(screen), 5)], "Name:")).To(Equal(1), "one frame on screen:\n%s", screen)
}
