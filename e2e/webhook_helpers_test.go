package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// webhookCertSecret is the Secret the spec's operator keeps its self-signed
// CA and serving certificate in, in the spec's namespace.
const webhookCertSecret = "echelon-webhook-tls"

// webhookOperator is an operator serving the admission webhooks on a loopback
// port, and the webhook configurations that send the spec namespace's
// requests to it.
type webhookOperator struct {
	*framework.Operator
	ns   string
	port int
}

// startWebhookOperator starts an operator for ns that serves the webhooks on a
// free loopback port with a self-signed certificate naming 127.0.0.1, and
// registers webhook configurations for ns only (a namespace selector), so
// that specs running at the same time never call each other's operators. The
// API server calls them over TLS at clientConfig.url, trusting the CA the
// operator injects.
func startWebhookOperator(ctx context.Context, name, ns string, flags ...string) *webhookOperator {
	GinkgoHelper()
	w := startWebhookServer(ctx, name, ns, flags...)
	installWebhookConfigurations(ctx, ns, w.port)
	return w
}

// startWebhookServer is startWebhookOperator without Echelon's webhook
// configurations: the spec registers its own.
func startWebhookServer(ctx context.Context, name, ns string, flags ...string) *webhookOperator {
	GinkgoHelper()
	port, err := framework.FreePort()
	Expect(err).NotTo(HaveOccurred())
	Expect(cp.GrantWebhookCerts(ctx, operatorUser.Name, ns)).To(Succeed())
	args := append([]string{
		"--webhook-port=" + strconv.Itoa(port),
		"--webhook-bind-host=127.0.0.1",
		"--webhook-cert-extra-sans=127.0.0.1",
		"--webhook-cert-secret=" + webhookCertSecret,
		"--pod-address=ip",
	}, flags...)
	return &webhookOperator{Operator: startOperator(ctx, name, ns, args...), ns: ns, port: port}
}

// installWebhookConfigurations registers the webhook configurations that
// `make manifests` generates (config/webhook/manifests.yaml, which the chart
// mirrors: failure policies, side effects, match policy, timeouts), changed
// only where a test must: named for ns, selecting ns alone, calling the
// operator at a loopback URL, and labelled for its CA injection. It waits
// until the operator has injected its CA.
func installWebhookConfigurations(ctx context.Context, ns string, port int) {
	GinkgoHelper()
	root, err := controlplane.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "config", "webhook", "manifests.yaml"))
	Expect(err).NotTo(HaveOccurred())
	name := "echelon-" + ns
	only := &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
	loopback := func(path string) string { return fmt.Sprintf("https://127.0.0.1:%d%s", port, path) }
	objs, err := framework.WebhookConfigurations(data, name, ns, webhookCertSecret, only, loopback, nil)
	Expect(err).NotTo(HaveOccurred())
	Expect(objs).To(HaveLen(2), "config/webhook/manifests.yaml holds a validating and a mutating configuration")
	// The generated RBAC lets the operator patch only configurations named
	// echelon; these are named for ns.
	Expect(cp.GrantWebhookConfigurations(ctx, operatorUser.Name, name)).To(Succeed())
	for _, o := range objs {
		Expect(k8s.Create(ctx, o)).To(Succeed())
	}
	DeferCleanup(func(ctx SpecContext) {
		for _, o := range objs {
			_ = k8s.Delete(ctx, o)
		}
	})
	Eventually(func() error { return framework.CAInjected(ctx, k8s, objs) }).WithContext(ctx).Should(Succeed())
}

// tryKubectl runs kubectl as the administrator and returns its output and
// whether it succeeded: a denied request is an outcome the specs expect.
func tryKubectl(ctx context.Context, args ...string) (string, bool) {
	cmd := exec.CommandContext(ctx, cp.Assets().Kubectl, append([]string{"--kubeconfig=" + cp.Kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err == nil
}

// scaleWithKubectl runs `kubectl scale` of kind/name in ns to replicas, with
// extra flags, and returns its output and whether it succeeded.
func scaleWithKubectl(ctx context.Context, ns, kind, name string, replicas int32, extra ...string) (string, bool) {
	args := append([]string{"-n", ns, "scale", strings.ToLower(kind) + "/" + name, "--replicas=" + strconv.Itoa(int(replicas))}, extra...)
	return tryKubectl(ctx, args...)
}

// warningEvents lists the reasons and messages of the Warning Events about the
// object named name in ns.
func warningEvents(ctx context.Context, ns, name string) []string {
	GinkgoHelper()
	var out []string
	for _, e := range settledEvents(ctx, ns, func(e corev1.Event) bool {
		return e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == name
	}) {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}
