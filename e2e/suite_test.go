// Package e2e runs Echelon as its own process, as its own user bound only to the
// generated RBAC, against a real control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok), and watches every pod while
// rollouts run.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/internal/operator"
	"github.com/echelon-operator/echelon/test/controlplane"
)

var (
	cp           *controlplane.ControlPlane
	k8s          client.Client
	clientset    *kubernetes.Clientset
	operatorBin  string
	operatorUser *controlplane.User
	logDir       string
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	RunSpecs(t, "Echelon end-to-end")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	cp, err = controlplane.Start(ctx, controlplane.Options{
		Nodes:   6,
		CRDDirs: []string{controlplane.CRDBasesDir},
		Scheme:  operator.NewScheme(),
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(GinkgoWriter, "stop control plane: %v\n", err)
		}
	})
	k8s = cp.Client()
	clientset, err = kubernetes.NewForConfig(cp.Config())
	Expect(err).NotTo(HaveOccurred())

	root, err := controlplane.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	logDir, err = os.MkdirTemp("", "echelon-e2e-operators-")
	Expect(err).NotTo(HaveOccurred())
	operatorBin, err = framework.BuildOperator(root, logDir)
	Expect(err).NotTo(HaveOccurred())
	operatorUser, err = cp.NewOperatorUser(ctx, "echelon-operator")
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(10*time.Minute))

// On failure, show the control plane's logs next to the operators'.
var _ = ReportAfterEach(func(report SpecReport) {
	if report.Failed() && cp != nil {
		fmt.Fprintln(GinkgoWriter, cp.LogTails(40))
	}
})

// startOperator runs an echelon process as the operator user, scoped to
// namespace, and stops it when the spec ends. Extra flags are appended.
func startOperator(ctx context.Context, name, namespace string, flags ...string) *framework.Operator {
	GinkgoHelper()
	args := append([]string{"--namespaces=" + namespace, "--leader-election-namespace=" + namespace}, flags...)
	op, err := framework.StartOperator(operatorBin, operatorUser.Kubeconfig, logDir, name+"-"+namespace, args...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			fmt.Fprintln(GinkgoWriter, op.LogTail(80))
		}
		_ = op.Stop(15 * time.Second)
	})
	Expect(op.WaitReady(ctx)).To(Succeed())
	return op
}

// newNamespace creates a fresh namespace for one spec.
func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns, err := cp.CreateNamespace(ctx, "e2e")
	Expect(err).NotTo(HaveOccurred())
	return ns
}
