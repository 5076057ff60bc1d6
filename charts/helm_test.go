/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package charts holds the tests of the Helm charts under this directory. They run
// the pinned helm binary (built by `make test-assets`) on charts/echelon and
// check what a user would get from `helm install`.
package charts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	chartDir         = "echelon"
	releaseName      = "echelon"
	releaseNamespace = "echelon-system"
	repoRoot         = ".."
)

// helmBinary finds helm: $ECHELON_HELM, else helm in $ECHELON_TEST_ASSETS (the
// test control plane's override), else the version pinned in
// hack/tools/helm/go.mod under bin/, else any helm under bin/. A missing helm
// fails the test: a chart test that skips silently proves nothing.
func helmBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("ECHELON_HELM"); p != "" {
		if !isExecutable(p) {
			t.Fatalf("ECHELON_HELM=%s is not an executable file", p)
		}
		return p
	}
	bin := filepath.Join(repoRoot, "bin")
	var candidates []string
	if dir := os.Getenv("ECHELON_TEST_ASSETS"); dir != "" {
		candidates = append(candidates, filepath.Join(dir, "helm"))
	}
	if v := pinnedHelmVersion(); v != "" {
		candidates = append(candidates, filepath.Join(bin, "helm-"+v, "helm"), filepath.Join(bin, "helm-"+v))
	}
	for _, pattern := range []string{"helm*/helm", "helm*", "*/helm"} {
		matches, _ := filepath.Glob(filepath.Join(bin, pattern))
		sort.Sort(sort.Reverse(sort.StringSlice(matches))) // newest version first
		candidates = append(candidates, matches...)
	}
	for _, c := range candidates {
		if isExecutable(c) {
			abs, err := filepath.Abs(c)
			if err != nil {
				t.Fatal(err)
			}
			return abs
		}
	}
	t.Fatalf("no helm binary under %s: run `make test-assets` (it builds the pinned helm), or point ECHELON_HELM at one", bin)
	return ""
}

func pinnedHelmVersion() string {
	f, err := os.Open(filepath.Join(repoRoot, "hack", "tools", "helm", "go.mod"))
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		for i, field := range fields {
			if field == "helm.sh/helm/v4" && i+1 < len(fields) {
				return fields[i+1]
			}
		}
	}
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// runHelm runs helm with a private home so that the user's repositories and
// plugins cannot change the result.
func runHelm(t testing.TB, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// manifest is the rendered chart, by kind.
type manifest struct {
	t    testing.TB
	objs []map[string]any
	// hooks are the objects Helm creates only around a release's lifetime
	// (annotated helm.sh/hook): the uninstall hook's Job and its rights.
	hooks []map[string]any
}

// render runs `helm template` with the given --set/--values arguments.
func render(t testing.TB, args ...string) manifest {
	t.Helper()
	stdout, stderr, err := runHelm(t, append([]string{"template", releaseName, chartDir, "--namespace", releaseNamespace}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, stderr)
	}
	m := manifest{t: t}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stdout), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("helm template printed invalid YAML: %v", err)
		}
		switch {
		case obj == nil:
		case isHook(obj):
			m.hooks = append(m.hooks, obj)
		default:
			m.objs = append(m.objs, obj)
		}
	}
	m.checkTyped()
	return m
}

// typedKinds are decoded strictly into their Go types, so that a misspelt or
// misplaced field in a template fails here rather than at the API server.
var typedKinds = map[string]func() any{
	"Deployment":                     func() any { return &appsv1.Deployment{} },
	"Job":                            func() any { return &batchv1.Job{} },
	"ServiceAccount":                 func() any { return &corev1.ServiceAccount{} },
	"Service":                        func() any { return &corev1.Service{} },
	"ClusterRole":                    func() any { return &rbacv1.ClusterRole{} },
	"ClusterRoleBinding":             func() any { return &rbacv1.ClusterRoleBinding{} },
	"Role":                           func() any { return &rbacv1.Role{} },
	"RoleBinding":                    func() any { return &rbacv1.RoleBinding{} },
	"PodDisruptionBudget":            func() any { return &policyv1.PodDisruptionBudget{} },
	"ConfigMap":                      func() any { return &corev1.ConfigMap{} },
	"ValidatingWebhookConfiguration": func() any { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
	"MutatingWebhookConfiguration":   func() any { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
	"CustomResourceDefinition":       func() any { return &apiextensionsv1.CustomResourceDefinition{} },
}

func (m manifest) checkTyped() {
	m.t.Helper()
	for _, obj := range append(slices.Clip(m.objs), m.hooks...) {
		kind, _ := obj["kind"].(string)
		if newObj, ok := typedKinds[kind]; ok {
			decodeStrict(m.t, obj, newObj())
		}
	}
}

func decodeStrict(t testing.TB, in map[string]any, out any) {
	t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("%s %s: %v", in["kind"], name(in), err)
	}
}

// isHook reports whether obj is a Helm hook, annotated helm.sh/hook.
func isHook(obj map[string]any) bool {
	meta, _ := obj["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	_, ok := annotations["helm.sh/hook"]
	return ok
}

func name(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	n, _ := meta["name"].(string)
	if ns, _ := meta["namespace"].(string); ns != "" {
		return ns + "/" + n
	}
	return n
}

// all returns the objects of one kind, decoded into T.
func all[T any](m manifest, kind string) []*T {
	m.t.Helper()
	var out []*T
	for _, obj := range m.objs {
		if obj["kind"] == kind {
			v := new(T)
			decodeStrict(m.t, obj, v)
			out = append(out, v)
		}
	}
	return out
}

// one returns the only object of a kind, failing when there is not exactly one.
func one[T any](m manifest, kind string) *T {
	m.t.Helper()
	objs := all[T](m, kind)
	if len(objs) != 1 {
		m.t.Fatalf("rendered %d %s objects, want 1", len(objs), kind)
	}
	return objs[0]
}

func (m manifest) count(kind string) int {
	n := 0
	for _, obj := range m.objs {
		if obj["kind"] == kind {
			n++
		}
	}
	return n
}

// generatedRules reads the ClusterRole controller-gen writes from the code's
// +kubebuilder:rbac markers: the permissions the operator needs.
func generatedRules(t testing.TB) []rbacv1.PolicyRule {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatalf("read the generated RBAC (run `make manifests`): %v", err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(raw, &role); err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) == 0 {
		t.Fatal("config/rbac/role.yaml has no rules")
	}
	return role.Rules
}

// permissions flattens rules into "group resource verb [name]" strings, so that
// two rule lists can be compared whatever their grouping.
func permissions(rules []rbacv1.PolicyRule) []string {
	seen := map[string]bool{}
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{"*"}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						seen[fmt.Sprintf("%q %s %s %s", g, res, v, n)] = true
					}
				}
			}
		}
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				seen["url "+u+" "+v] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// aggregateLabelPrefix marks the ClusterRoles that extend Kubernetes' built-in
// user roles (view, edit, admin) rather than grant the operator anything.
const aggregateLabelPrefix = "rbac.authorization.k8s.io/aggregate-to-"

// operatorClusterRoles returns the ClusterRoles that grant the operator its own
// permissions, leaving out those aggregated into the built-in user roles.
func operatorClusterRoles(m manifest) []*rbacv1.ClusterRole {
	var out []*rbacv1.ClusterRole
	for _, cr := range all[rbacv1.ClusterRole](m, "ClusterRole") {
		aggregated := false
		for k := range cr.Labels {
			aggregated = aggregated || strings.HasPrefix(k, aggregateLabelPrefix)
		}
		if !aggregated {
			out = append(out, cr)
		}
	}
	return out
}
