/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package nodetier

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/echelon-operator/echelon/test/controlplane"
)

// Network of a run: one namespace holds the whole node (control plane,
// containerd, kubelet, kube-proxy, and the pods behind a bridge), so that every
// address the tests use lives in it. The node's address sits on one end of a
// veth pair whose other end is in the namespace too (this machine has no dummy
// links): a non-loopback address the pods reach through the bridge. There is no
// default route and no masquerading: nothing leaves the namespace.

const (
	nodeLink = "echelon-node"
	peerLink = "echelon-peer"
)

func netnsPath(name string) string { return "/run/netns/" + name }

// createNamespace creates the run's network namespace with the node's
// address up in it.
func createNamespace(name string) error {
	steps := [][]string{
		{"netns", "add", name},
		{"-n", name, "link", "set", "lo", "up"},
		{"-n", name, "link", "add", nodeLink, "type", "veth", "peer", "name", peerLink},
		{"-n", name, "addr", "add", NodeAddress + nodePrefix, "dev", nodeLink},
		{"-n", name, "link", "set", peerLink, "up"},
		{"-n", name, "link", "set", nodeLink, "up"},
		// A route for the Service range: a connection from the node to a
		// ClusterIP must be routable before kube-proxy's DNAT rewrites it.
		{"-n", name, "route", "add", controlplane.ServiceCIDR, "dev", nodeLink},
	}
	for _, args := range steps {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}
