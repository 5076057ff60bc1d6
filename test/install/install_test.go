/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package install tests Echelon as users install it without the chart tests'
// help: `kubectl apply -f install.yaml` as `make release` writes it, and the
// quick start of docs/install.md, run command by command as written. Both run
// against the test control plane, whose kwok nodes run no containers: the
// operator runs as a local process from what the install created (its
// Deployment's flags and environment, its ServiceAccount's token), as a
// kubelet would run it.
package install

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/echelon-operator/echelon/test/controlplane"
	"github.com/echelon-operator/echelon/test/installed"
)

const (
	// Where install.yaml and the quick start put the operator.
	operatorNamespace = "echelon-system"
	operatorName      = "echelon"
)

// TestInstallYAML renders install.yaml with the script `make release` uses,
// applies it to a control plane that has nothing of Echelon, runs the operator
// from what it created and rolls out a group; then deletes it again and checks
// what stays: the users' StatefulSets, still OnDelete, and their pods.
func TestInstallYAML(t *testing.T) {
	if testing.Short() {
		t.Skip("applies install.yaml to a real control plane; skipped with -short")
	}
	cp, root, manifest := applyInstallYAML(t)
	ctx := context.Background()
	c := cp.Client()
	kubectl := func(args ...string) string {
		t.Helper()
		return run(t, root, nil, cp.Assets().Kubectl, append([]string{"--kubeconfig", cp.Kubeconfig()}, args...)...)
	}

	var deploy appsv1.Deployment
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorName}, &deploy)
		return err == nil && deploy.Status.AvailableReplicas == *deploy.Spec.Replicas, client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("Deployment from install.yaml never available: %v (status %+v)", err, deploy.Status)
	}
	if want := "ghcr.io/echelon-operator/echelon:" + appVersion(t, root); deploy.Spec.Template.Spec.Containers[0].Image != want {
		t.Errorf("install.yaml runs image %q, want %q", deploy.Spec.Template.Spec.Containers[0].Image, want)
	}

	op := installed.Run(t, cp, operatorNamespace, operatorName)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}); err != nil {
		t.Fatal(err)
	}
	if err := installed.RollOut(ctx, c, "apps", "web"); err != nil {
		t.Fatalf("%v\n%s", err, op.LogTail(40))
	}
	op.Stop()

	// Uninstalling with kubectl deletes the CRD, and with it the groups; the
	// StatefulSets and their pods stay, still OnDelete (docs/uninstall.md).
	kubectl("delete", "-f", manifest, "--wait", "--timeout=2m")
	err = c.Get(ctx, client.ObjectKey{Name: "rolloutgroups.echelon.dev"}, &apiextensionsv1.CustomResourceDefinition{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("CRD after kubectl delete -f install.yaml: %v, want it gone", err)
	}
	for _, name := range installed.Zones("web") {
		var sts appsv1.StatefulSet
		if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: name}, &sts); err != nil {
			t.Errorf("StatefulSet %s after uninstall: %v", name, err)
			continue
		}
		if sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType || sts.Status.ReadyReplicas != *sts.Spec.Replicas {
			t.Errorf("StatefulSet %s after uninstall: strategy %s, %d/%d ready; want it untouched", name, sts.Spec.UpdateStrategy.Type, sts.Status.ReadyReplicas, *sts.Spec.Replicas)
		}
	}
}

// applyInstallYAML starts a control plane, renders install.yaml with the
// script `make release` uses and applies it; it returns the control plane,
// the repository's root and the manifest's path.
func applyInstallYAML(t *testing.T) (*controlplane.ControlPlane, string, string) {
	t.Helper()
	cp := controlplane.StartForTest(t, controlplane.Options{Scheme: installed.Scheme()})
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dist := t.TempDir()
	run(t, root, nil, filepath.Join(root, "hack", "release.sh"), "--helm", cp.Assets().Helm, "--dist", dist,
		"--version", appVersion(t, root), "--manifests-only")
	manifest := filepath.Join(dist, "install.yaml")
	// The chart's hooks (the uninstall Job) are Helm's to run at their time:
	// applied with the rest, that Job would run at once.
	if raw, err := os.ReadFile(manifest); err != nil || bytes.Contains(raw, []byte("helm.sh/hook")) {
		t.Fatalf("install.yaml (%v): want no Helm hook in it", err)
	}
	run(t, root, nil, cp.Assets().Kubectl, "--kubeconfig", cp.Kubeconfig(), "apply", "-f", manifest)
	return cp, root, manifest
}

// run runs a command in dir and returns its standard output, failing the test
// with both outputs if it fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func appVersion(t *testing.T, root string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "charts", "echelon", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil || chart.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion: %q, %v", chart.AppVersion, err)
	}
	return chart.AppVersion
}
