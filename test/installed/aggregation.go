/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package installed

import (
	"os"

	"github.com/echelon-operator/echelon/test/controlplane"
)

// StartRoleAggregation runs kube-controller-manager's clusterrole-aggregation
// loop, which the test control plane leaves out, until the test ends. It fills
// the built-in view, edit and admin ClusterRoles with the rules of every
// ClusterRole labelled to aggregate into them, as in a real cluster.
func StartRoleAggregation(t controlplane.TB, cp *controlplane.ControlPlane) error {
	t.Helper()
	user, err := cp.NewUser("system:clusterrole-aggregation-controller", "system:masters")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "echelon-aggregation-")
	if err != nil {
		return err
	}
	p, err := startProcess("clusterrole-aggregation", dir, cp.Assets().KubeControllerManager, []string{
		"--kubeconfig=" + user.Kubeconfig,
		"--controllers=clusterrole-aggregation",
		"--leader-elect=false",
		"--secure-port=0",
	}, os.Environ())
	if err != nil {
		return err
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s", p.logTail(30))
		}
	})
	return nil
}
