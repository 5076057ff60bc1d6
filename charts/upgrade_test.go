/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package charts

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/echelon-operator/echelon/test/controlplane"
	"github.com/echelon-operator/echelon/test/installed"
)

// TestUpgrade installs the previous chart version from git, gives a group a
// new revision while no operator runs, upgrades the release to this chart and
// checks what users rely on: the upgrade applies (no immutable field changed),
// the CRD is the new one and serves the group created before it with the new
// defaults filled in, and the upgraded operator rolls out the pending revision.
func TestUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("installs into a real control plane; skipped with -short")
	}
	previous, previousVersion := previousChart(t)
	current := chartMeta(t)
	t.Logf("upgrading from chart %s to %s", previousVersion, current.Version)

	cp := controlplane.StartForTest(t, controlplane.Options{Scheme: installed.Scheme()})
	ctx := context.Background()
	c := cp.Client()
	helm := func(args ...string) string {
		t.Helper()
		args = append(args, "--kubeconfig", cp.Kubeconfig())
		stdout, stderr, err := runHelm(t, args...)
		if err != nil {
			t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
		}
		return stdout
	}
	helm("install", "echelon", previous, "--namespace", "echelon-system", "--create-namespace", "--wait", "--timeout", "2m")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}); err != nil {
		t.Fatal(err)
	}
	// The group and a new revision exist before the upgrade: a rollout is due
	// while the operator is being replaced.
	if err := installed.CreateGroup(ctx, c, "apps", "web"); err != nil {
		t.Fatal(err)
	}
	if err := installed.NewRevision(ctx, c, "apps", "web"); err != nil {
		t.Fatal(err)
	}

	helm("upgrade", "echelon", chartDir, "--namespace", "echelon-system", "--wait", "--timeout", "2m")
	var status struct {
		Info struct {
			Status string `json:"status"`
		} `json:"info"`
		Version int `json:"version"`
		Chart   struct {
			Metadata struct {
				Version string `json:"version"`
			} `json:"metadata"`
		} `json:"chart"`
	}
	if err := yaml.Unmarshal([]byte(helm("status", "echelon", "--namespace", "echelon-system", "--output", "json")), &status); err != nil {
		t.Fatal(err)
	}
	if status.Info.Status != "deployed" || status.Version != 2 {
		t.Errorf("release after upgrade: status %q revision %d, want deployed revision 2", status.Info.Status, status.Version)
	}

	var deploy appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: "echelon-system", Name: "echelon"}, &deploy); err != nil {
		t.Fatal(err)
	}
	rendered := one[appsv1.Deployment](render(t), "Deployment")
	if got, want := deploy.Spec.Template.Spec.Containers[0].Args, rendered.Spec.Template.Spec.Containers[0].Args; !reflect.DeepEqual(got, want) {
		t.Errorf("Deployment args after upgrade %v, want this chart's %v", got, want)
	}
	if v := deploy.Labels["app.kubernetes.io/version"]; v != current.AppVersion {
		t.Errorf("Deployment version label %q after upgrade, want %q", v, current.AppVersion)
	}

	// The CRD is the one this chart carries (CRDs are templates, so upgrades
	// update them), and the API server now defaults the group created before.
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: "rolloutgroups.echelon.dev"}, &crd); err != nil {
		t.Fatal(err)
	}
	if got, want := crd.Labels["helm.sh/chart"], "echelon-"+current.Version; got != want {
		t.Errorf("CRD label helm.sh/chart = %q after upgrade, want %q: the upgrade did not apply the CRD", got, want)
	}
	generated := generatedCRD(t, "echelon.dev_rolloutgroups.yaml")
	if !reflect.DeepEqual(crd.Spec.Versions[0].Schema, generated.Spec.Versions[0].Schema) {
		t.Error("CRD schema after upgrade differs from config/crd/bases: the upgrade did not update the CRD")
	}
	group := installed.RolloutGroup("apps", "web", nil, nil)
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "web"}, group); err != nil {
		t.Fatalf("RolloutGroup created before the upgrade: %v", err)
	}
	if d, ok := group.Object["spec"].(map[string]any)["progressDeadline"]; !ok || d == "" {
		t.Errorf("RolloutGroup created before the upgrade has spec %v: want the new CRD's defaults shown (progressDeadline)", group.Object["spec"])
	}

	op := installed.Run(t, cp, "echelon-system", "echelon")
	if err := installed.WaitRolledOut(ctx, c, "apps", "web"); err != nil {
		t.Fatalf("the upgraded operator did not roll out the revision made before the upgrade: %v\n%s", err, op.LogTail(40))
	}
}

// previousChartArchive is charts/echelon as the previous release shipped it
// (0.1.0, the chart of commit 4ccb600), made with
// `git archive --format=tar 4ccb600 charts/echelon`. It is kept in the
// repository rather than read from git history so that the test also runs on
// a shallow clone; when the chart's version changes, replace it with the
// release before.
const previousChartArchive = "testdata/echelon-0.1.0.tar"

// previousChart extracts the previous release's chart and returns its
// directory and version, which must differ from the working tree's.
func previousChart(t *testing.T) (dir, version string) {
	t.Helper()
	data, err := os.ReadFile(previousChartArchive)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	extractTar(t, data, dir)
	dir = filepath.Join(dir, "charts", "echelon")
	raw, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta chartYAML
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version == chartMeta(t).Version {
		t.Fatalf("%s holds chart version %s, the current one: it must hold the release before", previousChartArchive, meta.Version)
	}
	return dir, meta.Version
}

func extractTar(t *testing.T, data []byte, dir string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			var content []byte
			if content, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(path, content, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func generatedCRD(t *testing.T, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	return &crd
}
