/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/test/controlplane"
	"github.com/echelon-operator/echelon/test/nodetier"
)

const (
	// release and releaseNamespace are the chart's documented install.
	release          = "echelon"
	releaseNamespace = "echelon-system"
	// commandTimeout bounds every kubectl and helm command (helm's own
	// --timeout is 3m).
	commandTimeout = 4 * time.Minute
	// operatorSelector selects the operator's pods.
	operatorSelector = "app.kubernetes.io/instance=" + release + ",app.kubernetes.io/component=operator"
)

// run runs a command and returns its combined output and whether it exited 0.
func run(ctx context.Context, name string, args ...string) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+node.ControlPlane().Kubeconfig(),
		"HELM_CACHE_HOME="+filepath.Join(node.ControlPlane().Dir(), "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(node.ControlPlane().Dir(), "helm", "config"),
		"HELM_DATA_HOME="+filepath.Join(node.ControlPlane().Dir(), "helm", "data"))
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func helm(ctx context.Context, args ...string) string {
	GinkgoHelper()
	out, ok := run(ctx, node.ControlPlane().Assets().Helm, args...)
	Expect(ok).To(BeTrue(), "helm %s: %s", strings.Join(args, " "), out)
	return out
}

func kubectl(ctx context.Context, args ...string) (string, bool) {
	return run(ctx, node.ControlPlane().Assets().Kubectl, args...)
}

func chartDir() string {
	GinkgoHelper()
	root, err := controlplane.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	return filepath.Join(root, "charts", "echelon")
}

// newNamespace creates a namespace for one spec; the suite's end deletes
// every pod.
func newNamespace(ctx context.Context, name string) string {
	GinkgoHelper()
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	return name
}

// podStatefulSet is an OnDelete StatefulSet of real pods of the tier's
// image, Ready once they answer HTTP; revision goes into their environment,
// so that changing it is a new revision to roll out.
func podStatefulSet(ns, name, app string, replicas int32, revision string) *appsv1.StatefulSet {
	sts := builders.MakeStatefulSet(ns, name).Replicas(replicas).OnDelete().Label("app", app).ServiceName(app).
		PodLabel("app", app).PodLabel("statefulset", name).Container("app", nodetier.PodImage).Obj()
	c := &sts.Spec.Template.Spec.Containers[0]
	c.ImagePullPolicy = corev1.PullNever
	c.Env = []corev1.EnvVar{{Name: "REVISION", Value: revision}}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}
	sts.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	return sts
}

// startGroupMonitor starts the e2e pod monitor on a group's zones of
// replicas pods each, maxUnavailable 1; it stops when the spec ends.
func startGroupMonitor(ctx context.Context, ns string, zones []string, replicas int) *framework.Monitor {
	GinkgoHelper()
	members := make([]framework.WatchedMember, 0, len(zones))
	for _, z := range zones {
		members = append(members, framework.WatchedMember{Name: z, Replicas: replicas, MaxUnavailable: intstr.FromInt32(1)})
	}
	monitor, err := framework.StartMonitor(ctx, cs, ns, members)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(monitor.Stop)
	return monitor
}

// expectNoBreaches fails the spec on a breach of the guarantees, and reports
// the rolls the monitor excused because a real kubelet withdrew a new pod's
// readiness right after granting it (framework.Monitor.Flaps).
func expectNoBreaches(monitor *framework.Monitor) {
	GinkgoHelper()
	Expect(monitor.Breaches()).To(BeEmpty())
	if flaps := monitor.Flaps(); len(flaps) > 0 {
		AddReportEntry("rolls beside a kubelet's readiness flap (not breaches)", strings.Join(flaps, "\n"))
	}
}

// setRevision changes the pods' REVISION: a new revision of the StatefulSet.
func setRevision(ctx context.Context, ns string, names []string, revision string) {
	GinkgoHelper()
	for _, name := range names {
		patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"REVISION","value":%q}]}]}}}}`, revision)
		Expect(k8s.Patch(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
			client.RawPatch("application/strategic-merge-patch+json", []byte(patch)))).To(Succeed())
	}
}

// waitPodsReady waits until every pod of the StatefulSets is Ready.
func waitPodsReady(ctx context.Context, ns string, names ...string) {
	GinkgoHelper()
	for _, name := range names {
		Eventually(func(g Gomega) {
			var sts appsv1.StatefulSet
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sts)).To(Succeed())
			g.Expect(sts.Status.ReadyReplicas).To(Equal(*sts.Spec.Replicas), "StatefulSet %s: ready pods", name)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).Should(Succeed())
	}
}

// operatorPods are the operator's pods, by name.
func operatorPods(ctx context.Context) []corev1.Pod {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(releaseNamespace), client.MatchingLabelsSelector{Selector: mustSelector(operatorSelector)})).To(Succeed())
	return pods.Items
}

// leader is the pod that holds the operator's Lease: its identity is
// <pod name>_<uuid>.
func leader(ctx context.Context) string {
	GinkgoHelper()
	var lease coordinationv1.Lease
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: release}, &lease); err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	holder, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return holder
}

// scrape GETs a URL from the node's namespace, where kube-proxy routes
// ClusterIPs.
func scrape(ctx context.Context, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// chartTag is the chart's appVersion, the default image tag.
func chartTag() string {
	GinkgoHelper()
	_, tag, ok := strings.Cut(node.OperatorImage, ":")
	Expect(ok).To(BeTrue())
	return tag
}

// expectScaleRefused waits until the no-downscale webhook refuses a dry-run
// scale-down of the StatefulSet of namespace "guarded" through the webhook
// Service: it judges from the operator's cache, which must have seen the
// ScalingPolicy first.
func expectScaleRefused(ctx context.Context) {
	GinkgoHelper()
	Eventually(func() string {
		out, ok := kubectl(ctx, "-n", "guarded", "scale", "statefulset", "guarded", "--replicas=0", "--dry-run=server")
		if ok {
			return "admitted: " + out
		}
		return out
	}).WithContext(ctx).Should(ContainSubstring("ScalingPolicy guarded"))
}

// webhookProbe asks the no-downscale webhook about the guarded StatefulSet
// of namespace "guarded" every 100 ms (a server-side dry run of a scale
// down) and records every answer that is not its refusal.
type webhookProbe struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	asked  int
	failed []probeFailure
}

type probeFailure struct {
	at  time.Time
	err string
}

func startWebhookProbe(ctx context.Context) *webhookProbe {
	ctx, cancel := context.WithCancel(ctx)
	p := &webhookProbe{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(p.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for range 3000 { // at most five minutes
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "guarded", Name: "guarded"}}
			scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: "guarded", Name: "guarded"}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}
			err := k8s.SubResource("scale").Update(ctx, sts, client.WithSubResourceBody(scale), client.DryRunAll)
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			p.asked++
			if err == nil || !strings.Contains(err.Error(), "ScalingPolicy guarded") {
				p.failed = append(p.failed, probeFailure{at: time.Now(), err: fmt.Sprint(err)})
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// stop ends the probe and returns the failed answers and the longest run of
// failures (from the first of a run to the last, plus one interval).
func (p *webhookProbe) stop() ([]string, time.Duration) {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	var failures []string
	var longest time.Duration
	var runStart, last time.Time
	for _, f := range p.failed {
		failures = append(failures, f.at.Format("15:04:05.000")+" "+f.err)
		if last.IsZero() || f.at.Sub(last) > 300*time.Millisecond {
			runStart = f.at
		}
		last = f.at
		longest = max(longest, last.Sub(runStart)+100*time.Millisecond)
	}
	return failures, longest
}

func (p *webhookProbe) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asked
}
