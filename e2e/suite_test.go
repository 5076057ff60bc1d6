// Package e2e runs Echelon as its own process, as its own user bound only to the
// generated RBAC, against a real control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok), and watches every pod while
// rollouts run.
//
// `go test ./e2e/` runs the specs one after the other. Every spec has its own
// namespace and its own operator scoped to it, so they can also run at the same
// time against the one control plane: the Ginkgo CLI's -p (as `make test-e2e`
// does) starts it in process 1 and shares it with the others.
package e2e

import (
	"context"
	"encoding/json"
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
	pluginBin    string
	operatorUser *controlplane.User
	logDir       string
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
	RunSpecs(t, "Echelon end-to-end")
}

// suiteState is what process 1 hands the other parallel processes.
type suiteState struct {
	ControlPlane       controlplane.Handle `json:"controlPlane"`
	OperatorBin        string              `json:"operatorBin"`
	PluginBin          string              `json:"pluginBin"`
	OperatorUser       string              `json:"operatorUser"`
	OperatorKubeconfig string              `json:"operatorKubeconfig"`
	LogDir             string              `json:"logDir"`
}

var _ = SynchronizedBeforeSuite(func(ctx SpecContext) []byte {
	var err error
	cp, err = controlplane.Start(ctx, controlplane.Options{
		Nodes:   6,
		CRDDirs: []string{controlplane.CRDBasesDir},
		Scheme:  operator.NewScheme(),
	})
	Expect(err).NotTo(HaveOccurred())
	// Registered here, it runs once every parallel process has finished.
	DeferCleanup(func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(GinkgoWriter, "stop control plane: %v\n", err)
		}
	})
	root, err := controlplane.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	dir, err := os.MkdirTemp("", "echelon-e2e-operators-")
	Expect(err).NotTo(HaveOccurred())
	// The binaries and the operators' logs (a failed spec prints its
	// operator's tail) go with the suite, unless E2E_KEEP_LOGS is set: each
	// run left 128 MB behind.
	DeferCleanup(func() {
		if os.Getenv("E2E_KEEP_LOGS") != "" {
			fmt.Fprintf(GinkgoWriter, "operator binaries and logs kept in %s\n", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	bin, err := framework.BuildOperator(root, dir)
	Expect(err).NotTo(HaveOccurred())
	plugin, err := framework.BuildPlugin(root, dir)
	Expect(err).NotTo(HaveOccurred())
	user, err := cp.NewOperatorUser(ctx, "echelon-operator")
	Expect(err).NotTo(HaveOccurred())
	state, err := json.Marshal(suiteState{ControlPlane: cp.Share(), OperatorBin: bin, PluginBin: plugin,
		OperatorUser: user.Name, OperatorKubeconfig: user.Kubeconfig, LogDir: dir})
	Expect(err).NotTo(HaveOccurred())
	return state
}, func(data []byte) {
	var state suiteState
	Expect(json.Unmarshal(data, &state)).To(Succeed())
	if cp == nil {
		var err error
		cp, err = controlplane.Attach(state.ControlPlane, operator.NewScheme())
		Expect(err).NotTo(HaveOccurred())
	}
	k8s = cp.Client()
	var err error
	clientset, err = kubernetes.NewForConfig(cp.Config())
	Expect(err).NotTo(HaveOccurred())
	operatorBin, pluginBin, logDir = state.OperatorBin, state.PluginBin, state.LogDir
	operatorUser = &controlplane.User{Name: state.OperatorUser, Kubeconfig: state.OperatorKubeconfig}
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
	// The operator holds Lease rights only in its leader-election namespace, as
	// the chart grants them.
	Expect(cp.GrantLeaderElection(ctx, operatorUser.Name, namespace)).To(Succeed())
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
