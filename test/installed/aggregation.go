/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package installed

import (
	"os"

	"github.com/echelon-operator/echelon/e2e/framework"
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
	p, err := framework.StartProcess(framework.Process{Name: "clusterrole-aggregation", Binary: cp.Assets().KubeControllerManager, LogDir: dir,
		Args: []string{
			"--kubeconfig=" + user.Kubeconfig,
			"--controllers=clusterrole-aggregation",
			"--leader-elect=false",
			"--secure-port=0",
		}})
	if err != nil {
		return err
	}
	t.Cleanup(func() {
		_ = p.Stop(stopGrace)
		if t.Failed() {
			// Keep the logs of a failed test for whoever reads them.
			t.Logf("%s (logs in %s)", p.LogTail(30), dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return nil
}
