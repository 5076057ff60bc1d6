/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package nodetier

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/test/controlplane"
)

const (
	// scratchEnv passes the run's scratch directory into the namespace.
	scratchEnv = "ECHELON_NODETIER_SCRATCH"

	// NodeName is the one node's name.
	NodeName = "echelon-node"

	// PauseImage is the pod sandbox's image and PodImage the workloads'
	// (podimage serve): both built by Start and imported into containerd.
	PauseImage = "localhost/echelon-nodetier/pause:1"
	PodImage   = "localhost/echelon-nodetier/pod:1"

	// startTimeout bounds every wait of Start; a warm start takes under a
	// minute on two busy cores.
	startTimeout = 3 * time.Minute
)

// Options configure a node.
type Options struct {
	// Scheme of the control plane's Client; nil means client-go's.
	Scheme *runtime.Scheme
}

// Node is a control plane with one real node: containerd, the kubelet and
// kube-proxy, in the run's network namespace. The operator image of `make
// image` (OperatorImage) and the tier's own images are in containerd already,
// so pods of them start without a registry.
type Node struct {
	cp      *controlplane.ControlPlane
	state   *state
	scratch string
	socket  string // containerd's
	// OperatorImage is the image `make image` built, as the chart names it by
	// default (ghcr.io/echelon-operator/echelon:<appVersion>).
	OperatorImage string
}

// Start starts the control plane and the node and returns once the node is
// Ready and kube-proxy routes the `kubernetes` Service. Call it inside Main.
func Start(ctx context.Context, opts Options) (*Node, error) {
	runName, scratch := os.Getenv(insideEnv), os.Getenv(scratchEnv)
	if runName == "" || scratch == "" {
		return nil, errors.New("nodetier.Start outside nodetier.Main")
	}
	st, err := loadState(filepath.Join(stateRoot, runName))
	if err != nil {
		return nil, err
	}
	bins, err := nodeBinaries()
	if err != nil {
		return nil, err
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{
		RealNodes: &controlplane.RealNodes{Address: NodeAddress},
		Scheme:    opts.Scheme,
	})
	if err != nil {
		return nil, err
	}
	n := &Node{cp: cp, state: st, scratch: scratch, socket: filepath.Join(scratch, "containerd.sock"), OperatorImage: bins.operatorImage}
	if err := n.start(ctx, bins); err != nil {
		err = fmt.Errorf("start node: %w\n%s", err, cp.LogTails(40))
		return nil, errors.Join(err, n.Stop())
	}
	return n, nil
}

func (n *Node) start(ctx context.Context, bins *binaries) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	if err := n.importImages(ctx, bins.operatorArchive); err != nil {
		return err
	}
	if err := n.startKubelet(bins.kubelet); err != nil {
		return err
	}
	if err := n.startKubeProxy(bins.kubeProxy); err != nil {
		return err
	}
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	// The kubelet has set its kernel settings by now; put them back.
	return n.state.restoreSysctls()
}

// waitReady waits for the Node to be Ready and for kube-proxy's rules to
// route the `kubernetes` Service to the API server.
func (n *Node) waitReady(ctx context.Context) error {
	state := "node not registered"
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, c := range []string{"containerd", "kubelet", "kube-proxy"} {
			if done, err := n.cp.ComponentExited(c); done {
				return false, err
			}
		}
		var node corev1.Node
		if err := n.cp.Client().Get(ctx, client.ObjectKey{Name: NodeName}, &node); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		ready := false
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			state = "node not Ready"
			return false, nil
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(controlplane.KubernetesServiceIP, "443"), time.Second)
		if err != nil {
			state = fmt.Sprintf("the kubernetes Service not routed (kube-proxy): %v", err)
			return false, nil
		}
		_ = conn.Close()
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for node: %s: %w\n%s", state, err, networkState())
	}
	return nil
}

// networkState describes the namespace's network, for errors.
func networkState() string {
	var b strings.Builder
	for _, c := range [][]string{{"ip", "-br", "addr"}, {"ip", "route"}, {"iptables-save"}} {
		out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "==> %s (%v) <==\n%s", strings.Join(c, " "), err, out)
	}
	return b.String()
}

// ControlPlane is the node's control plane.
func (n *Node) ControlPlane() *controlplane.ControlPlane { return n.cp }

// Stop deletes every pod through the API, so that the kubelet tears their
// sandboxes down (CNI releases their addresses), then stops the node and the
// control plane. Main's teardown removes whatever is left.
func (n *Node) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if err := n.deletePods(ctx); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, n.cp.Stop())
	return errors.Join(errs...)
}

func (n *Node) deletePods(ctx context.Context) error {
	c := n.cp.Client()
	// Deleting the namespaces removes the controllers that would recreate
	// the pods.
	var namespaces corev1.NamespaceList
	if err := c.List(ctx, &namespaces); err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	for i := range namespaces.Items {
		if name := namespaces.Items[i].Name; name != metav1.NamespaceDefault && !strings.HasPrefix(name, "kube-") {
			_ = c.Delete(ctx, &namespaces.Items[i])
		}
	}
	// What counts is that containerd has no sandbox left once the pods are
	// gone. Bounded by ctx.
	var state string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods); err != nil {
			state = err.Error()
			return false, nil
		}
		for i := range pods.Items {
			_ = c.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(1))
		}
		out, err := n.ctr(ctx, "tasks", "list", "--quiet")
		state = fmt.Sprintf("%d pods, tasks %q (%v)", len(pods.Items), strings.Fields(out), err)
		return len(pods.Items) == 0 && err == nil && strings.TrimSpace(out) == "", nil
	})
	if err != nil {
		return fmt.Errorf("delete pods: %s: %w", state, err)
	}
	return nil
}

// ctr runs containerd's client against the node's containerd, in the
// namespace the kubelet uses.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.socket, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// ImportImage imports an OCI archive into the node's containerd, e.g. a
// second operator image for an upgrade.
func (n *Node) ImportImage(ctx context.Context, archive string) error {
	_, err := n.ctr(ctx, "images", "import", archive)
	return err
}

// TagImage gives an image in the node's containerd another name.
func (n *Node) TagImage(ctx context.Context, source, target string) error {
	_, err := n.ctr(ctx, "images", "tag", "--force", source, target)
	return err
}

// binaries are what the node runs besides the Debian packages.
type binaries struct {
	kubelet, kubeProxy string
	operatorArchive    string
	operatorImage      string
}

var appVersionLine = regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)"?\s*$`)

// nodeBinaries finds the kubelet and kube-proxy of `make test-assets` and the
// operator image of `make image`.
func nodeBinaries() (*binaries, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	version, err := controlplane.PinnedVersion("kubernetes", "k8s.io/kubernetes")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "bin", "kubernetes-node-"+version)
	b := &binaries{kubelet: filepath.Join(dir, "kubelet"), kubeProxy: filepath.Join(dir, "kube-proxy")}
	for _, p := range []string{b.kubelet, b.kubeProxy} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("no %s (`make test-assets` builds it)", p)
		}
	}
	chart, err := os.ReadFile(filepath.Join(root, "charts", "echelon", "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	m := appVersionLine.FindSubmatch(chart)
	if m == nil {
		return nil, errors.New("no appVersion in charts/echelon/Chart.yaml")
	}
	b.operatorArchive = filepath.Join(root, "bin", "echelon-image-"+string(m[1])+".oci.tar")
	b.operatorImage = "ghcr.io/echelon-operator/echelon:" + string(m[1])
	if _, err := os.Stat(b.operatorArchive); err != nil {
		return nil, fmt.Errorf("no operator image %s (`make image` builds it)", b.operatorArchive)
	}
	return b, nil
}
