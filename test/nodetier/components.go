/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package nodetier

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/echelon-operator/echelon/test/controlplane"
)

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

func (n *Node) path(elem ...string) string {
	return filepath.Join(append([]string{n.scratch}, elem...)...)
}

// writeFile writes a configuration file under the scratch directory.
func (n *Node) writeFile(rel, data string) (string, error) {
	p := n.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	return p, os.WriteFile(p, []byte(data), 0o644)
}

// startContainerd starts Debian's containerd with everything under the
// scratch directory. On this kind of machine: restrict_oom_score_adj, since
// lowering oom_score_adj needs CAP_SYS_RESOURCE (without it every sandbox
// fails: "can't get final child's PID from pipe"); cgroupfs (no systemd);
// the pods' network namespaces under the state directory, not /run/netns.
//
// The pods' network: a bridge with the pods' gateway, and routes in the pods
// to the Service range and the node's address only: no default route.
func (n *Node) startContainerd(ctx context.Context) error {
	cni, err := n.writeFile("cni/net.d/10-echelon.conflist", fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "echelon-nodetier",
  "plugins": [
    {
      "type": "bridge", "bridge": "echelon-br0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q,
               "routes": [{"dst": %q}, {"dst": %q}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, PodCIDR, n.path("cni", "ipam"), controlplane.ServiceCIDR, nodeNetwork))
	if err != nil {
		return err
	}
	config, err := n.writeFile("containerd/config.toml", fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, n.path("containerd", "root"), n.path("containerd", "state"), n.socket, n.path("containerd", "opt"),
		PauseImage, cniBinDir, filepath.Dir(cni)))
	if err != nil {
		return err
	}
	containerd, err := exec.LookPath("containerd")
	if err != nil {
		return err
	}
	if _, err := n.cp.StartComponent("containerd", containerd, nil, "--config", config); err != nil {
		return err
	}
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if done, err := n.cp.ComponentExited("containerd"); done {
			return false, err
		}
		_, err := n.ctr(ctx, "version")
		return err == nil, nil
	})
}

// importImages builds the tier's pause and workload images and imports them
// and the operator's image into containerd.
func (n *Node) importImages(ctx context.Context, operatorArchive string) error {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	bin := n.path("images", "podimage")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./test/nodetier/podimage")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build podimage: %w: %s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	archive := n.path("images", "nodetier.oci.tar")
	if err := writeOCIArchive(archive, []ociImage{
		{name: PauseImage, entrypoint: []string{"/podimage", "pause"}, binaryName: "podimage", binary: data},
		{name: PodImage, entrypoint: []string{"/podimage", "serve"}, binaryName: "podimage", binary: data},
	}); err != nil {
		return err
	}
	for _, a := range []string{archive, operatorArchive} {
		if err := n.ImportImage(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// startKubelet starts the kubelet as system:node:<name>, authorized by the
// Node authorizer and NodeRestriction, not as an administrator.
func (n *Node) startKubelet(kubelet string) error {
	user, err := n.cp.NewUser("system:node:"+NodeName, "system:nodes")
	if err != nil {
		return err
	}
	// failCgroupV1: this machine has cgroup v1 only. cgroupsPerQOS off and no
	// allocatable enforcement: fewer cgroups to remove. No eviction or image
	// garbage collection: the images cannot be pulled again, and the disk is
	// shared. oomScoreAdj 0: lowering it needs CAP_SYS_RESOURCE.
	config, err := n.writeFile("kubelet/config.yaml", fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://%s
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
resolvConf: ""
clusterDomain: cluster.local
oomScoreAdj: 0
evictionHard:
  memory.available: "0%%"
  nodefs.available: "0%%"
  imagefs.available: "0%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %q
authorization:
  mode: Webhook
`, n.socket, NodeAddress, n.cp.ServingCAFile()))
	if err != nil {
		return err
	}
	_, err = n.cp.StartComponent("kubelet", kubelet, nil,
		"--config="+config,
		"--kubeconfig="+user.Kubeconfig,
		"--root-dir="+n.path("kubelet", "root"),
		"--cert-dir="+n.path("kubelet", "pki"),
		"--volume-plugin-dir="+n.path("kubelet", "volume-plugins"),
		"--node-ip="+NodeAddress,
		"--hostname-override="+NodeName,
		"--node-labels=topology.kubernetes.io/zone=zone-a",
	)
	return err
}

// startKubeProxy starts kube-proxy in iptables mode as system:kube-proxy,
// which the API server's bootstrap roles bind to system:node-proxier. Its
// conntrack settings are zero, so it leaves the kernel's conntrack settings,
// partly machine-wide, alone.
func (n *Node) startKubeProxy(kubeProxy string) error {
	user, err := n.cp.NewUser("system:kube-proxy")
	if err != nil {
		return err
	}
	config, err := n.writeFile("kube-proxy/config.yaml", fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
mode: iptables
hostnameOverride: %s
clusterCIDR: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, user.Kubeconfig, NodeName, PodCIDR, NodeAddress))
	if err != nil {
		return err
	}
	_, err = n.cp.StartComponent("kube-proxy", kubeProxy, nil, "--config="+config)
	return err
}
