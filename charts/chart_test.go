/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package charts

import (
	"flag"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/echelon-operator/echelon/internal/options"
)

func TestLint(t *testing.T) {
	t.Parallel()
	valueFiles, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The defaults, then each CI values file (the settings users combine most).
	for _, values := range append([]string{""}, valueFiles...) {
		name := "defaults"
		if values != "" {
			name = strings.TrimSuffix(filepath.Base(values), "-values.yaml")
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := []string{"lint", "--strict", chartDir, "--namespace", releaseNamespace}
			if values != "" {
				args = append(args, "--values", values)
			}
			if stdout, stderr, err := runHelm(t, args...); err != nil {
				t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	m := render(t)

	deploy := one[appsv1.Deployment](m, "Deployment")
	if deploy.Namespace != releaseNamespace {
		t.Errorf("Deployment namespace = %q, want the release namespace %q", deploy.Namespace, releaseNamespace)
	}
	if deploy.Spec.Replicas == nil || *deploy.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2 (a standby ready to take over)", deploy.Spec.Replicas)
	}
	pod := deploy.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	opts := parseArgs(t, c.Args)
	if !opts.LeaderElect || !slices.Contains(c.Args, "--leader-elect=true") {
		t.Errorf("args %v: want --leader-elect=true", c.Args)
	}
	if opts.HTTPPort != 8001 || len(opts.Namespaces) != 0 {
		t.Errorf("args %v: want --http-port=8001 and no --namespaces (all namespaces)", c.Args)
	}
	if want := "ghcr.io/echelon-operator/echelon:" + chartMeta(t).AppVersion; c.Image != want {
		t.Errorf("image = %q, want %q (the tag defaults to appVersion)", c.Image, want)
	}

	assertSecure(t, pod.SecurityContext, c.SecurityContext)
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v: want memory requests and limits by default", c.Resources)
	}

	if !hasEnvFromField(c.Env, "POD_NAMESPACE", "metadata.namespace") {
		t.Errorf("env %+v: want POD_NAMESPACE from the downward API (metadata.namespace)", c.Env)
	}
	if len(c.Ports) != 2 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8001 || c.Ports[1].Name != "webhook" || c.Ports[1].ContainerPort != 8443 {
		t.Errorf("ports = %+v, want http:8001 and webhook:8443", c.Ports)
	}
	assertProbe(t, "liveness", c.LivenessProbe, "/healthz")
	assertProbe(t, "readiness", c.ReadinessProbe, "/ready")
	assertProbe(t, "startup", c.StartupProbe, "/ready")

	svc := service(t, m, "echelon-metrics")
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8001 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("metrics Service ports = %+v, want 8001 -> http", svc.Spec.Ports)
	}
	if !selects(svc.Spec.Selector, deploy.Spec.Template.Labels) {
		t.Errorf("Service selector %v does not select the pod labels %v", svc.Spec.Selector, deploy.Spec.Template.Labels)
	}

	pdb := one[policyv1.PodDisruptionBudget](m, "PodDisruptionBudget")
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget minAvailable = %v, want 1", pdb.Spec.MinAvailable)
	}
	if n := m.count("ServiceMonitor"); n != 0 {
		t.Errorf("%d ServiceMonitors by default, want none (the CRD may be missing)", n)
	}

	sa := one[corev1.ServiceAccount](m, "ServiceAccount")
	if pod.ServiceAccountName != sa.Name {
		t.Errorf("pod runs as ServiceAccount %q, the chart creates %q", pod.ServiceAccountName, sa.Name)
	}

	// Watching all namespaces: exactly the generated ClusterRole, bound to the
	// operator's ServiceAccount, and no per-namespace Roles besides leader election.
	crs := operatorClusterRoles(m)
	if len(crs) != 1 {
		t.Fatalf("%d ClusterRoles for the operator, want 1", len(crs))
	}
	cr := crs[0]
	if want := generatedRules(t); !reflect.DeepEqual(cr.Rules, want) {
		t.Errorf("ClusterRole rules differ from config/rbac/role.yaml (run `make manifests`)\n got: %+v\nwant: %+v", cr.Rules, want)
	}
	crb := one[rbacv1.ClusterRoleBinding](m, "ClusterRoleBinding")
	// Two replicas never share a node by default: a spread over hostnames that
	// cannot be skipped, among this release's pods.
	tsc := pod.TopologySpreadConstraints
	if len(tsc) != 1 || tsc[0].TopologyKey != corev1.LabelHostname || tsc[0].WhenUnsatisfiable != corev1.DoNotSchedule || tsc[0].MaxSkew != 1 ||
		tsc[0].LabelSelector == nil || !selects(tsc[0].LabelSelector.MatchLabels, deploy.Spec.Template.Labels) {
		t.Errorf("topologySpreadConstraints = %+v, want maxSkew 1 over %s, DoNotSchedule, selecting the operator pods", tsc, corev1.LabelHostname)
	}
	assertBinding(t, crb.RoleRef, crb.Subjects, "ClusterRole", cr.Name, sa)
	assertLeaderElectionRBAC(t, m, sa, opts.LeaderElectionID)
	assertWebhookCertRBAC(t, m, opts.Webhook.CertSecret)

	assertCRDs(t, m, true)
}

// TestDefaultArgsMatchBinaryDefaults guards the chart against a binary default
// changing under it unnoticed: the chart passes every setting explicitly, and
// those values should stay what the binary would choose, except where the chart
// deliberately differs (leader election on, a per-release Lease).
func TestDefaultArgsMatchBinaryDefaults(t *testing.T) {
	t.Parallel()
	deploy := one[appsv1.Deployment](render(t), "Deployment")
	got := parseArgs(t, deploy.Spec.Template.Spec.Containers[0].Args)
	want := options.Default()
	want.LeaderElect = true
	want.LeaderElectionID = releaseName
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chart defaults differ from the binary's:\n chart: %+v\nbinary: %+v", got, want)
	}
}

func TestCRDsSwitches(t *testing.T) {
	t.Parallel()
	t.Run("disabled", func(t *testing.T) {
		t.Parallel()
		m := render(t, "--set", "crds.enabled=false")
		if n := m.count("CustomResourceDefinition"); n != 0 {
			t.Errorf("crds.enabled=false rendered %d CRDs, want none", n)
		}
		if m.count("Deployment") != 1 {
			t.Error("crds.enabled=false must still install the operator")
		}
	})
	t.Run("not kept", func(t *testing.T) {
		t.Parallel()
		assertCRDs(t, render(t, "--set", "crds.keep=false"), false)
	})
}

func TestWatchNamespaces(t *testing.T) {
	t.Parallel()
	m := render(t, "--set", "watchNamespaces={a,b}")

	deploy := one[appsv1.Deployment](m, "Deployment")
	args := deploy.Spec.Template.Spec.Containers[0].Args
	if opts := parseArgs(t, args); !slices.Contains(args, "--namespaces=a,b") || !reflect.DeepEqual(opts.Namespaces, []string{"a", "b"}) {
		t.Errorf("args %v: want --namespaces=a,b", args)
	}
	sa := one[corev1.ServiceAccount](m, "ServiceAccount")

	var roleNamespaces []string
	var granted []rbacv1.PolicyRule
	for _, role := range all[rbacv1.Role](m, "Role") {
		if role.Namespace == releaseNamespace {
			continue // leader election, checked below
		}
		roleNamespaces = append(roleNamespaces, role.Namespace)
		if len(granted) == 0 {
			granted = role.Rules
		} else if !reflect.DeepEqual(role.Rules, granted) {
			t.Errorf("Role in %s grants other rules than the Role in %s", role.Namespace, roleNamespaces[0])
		}
		bound := false
		for _, rb := range all[rbacv1.RoleBinding](m, "RoleBinding") {
			if rb.Namespace == role.Namespace && rb.RoleRef.Name == role.Name {
				assertBinding(t, rb.RoleRef, rb.Subjects, "Role", role.Name, sa)
				bound = true
			}
		}
		if !bound {
			t.Errorf("Role %s/%s is not bound", role.Namespace, role.Name)
		}
	}
	slices.Sort(roleNamespaces)
	if !reflect.DeepEqual(roleNamespaces, []string{"a", "b"}) {
		t.Errorf("Roles in namespaces %v, want [a b]", roleNamespaces)
	}

	// Nothing lost and nothing added: the Roles plus the ClusterRole (only for
	// cluster-scoped resources, if any) grant exactly what the code declares.
	clusterRoles := operatorClusterRoles(m)
	for _, cr := range clusterRoles {
		granted = append(granted, cr.Rules...)
		for _, p := range permissions(cr.Rules) {
			if slices.Contains(permissions(rolesIn(m, "a")), p) {
				t.Errorf("ClusterRole %s grants %s cluster-wide although a Role grants it per namespace", cr.Name, p)
			}
		}
	}
	if got, want := permissions(granted), permissions(generatedRules(t)); !reflect.DeepEqual(got, want) {
		t.Errorf("namespaced RBAC grants\n%s\nwant (config/rbac/role.yaml)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(clusterRoles) != m.count("ClusterRoleBinding") {
		t.Errorf("%d ClusterRoles but %d ClusterRoleBindings", len(clusterRoles), m.count("ClusterRoleBinding"))
	}
	assertLeaderElectionRBAC(t, m, sa, parseArgs(t, args).LeaderElectionID)
}

func rolesIn(m manifest, namespace string) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, role := range all[rbacv1.Role](m, "Role") {
		if role.Namespace == namespace {
			rules = append(rules, role.Rules...)
		}
	}
	return rules
}

// TestSchemaRejects checks that values.schema.json turns a bad value into an
// error naming it, instead of a broken Deployment.
func TestSchemaRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, set, wantInError string
	}{
		{"replicas is a number", "replicas=two", "at '/replicas'"},
		{"unknown top-level key", "replica=3", "'replica' not allowed"},
		{"unknown nested key", "leaderElection.enable=true", "'enable' not allowed"},
		{"closed set of log levels", "logging.level=verbose", "at '/logging/level'"},
		{"namespace names", "watchNamespaces={Team_A}", "at '/watchNamespaces/0'"},
		{"durations", "leaderElection.leaseDuration=15sec", "at '/leaderElection/leaseDuration'"},
		{"port range", "http.port=70000", "at '/http/port'"},
		{"flags only in extraArgs", "extraArgs={verbose}", "at '/extraArgs/0'"},
		{"container security context keys", "securityContext.runAsUsr=1", "at '/securityContext': additional properties 'runAsUsr' not allowed"},
		{"pod security context, nested", "podSecurityContext.seccompProfile.typ=x", "at '/podSecurityContext/seccompProfile': additional properties 'typ'"},
		{"security context types", "securityContext.privileged=yes", "at '/securityContext/privileged'"},
		{"toleration operators", "tolerations[0].operator=Maybe", "at '/tolerations/0/operator'"},
		{"affinity keys", "affinity.podAntiAffinity.required=x", "at '/affinity/podAntiAffinity': additional properties 'required'"},
		{"topology spread", "topologySpreadConstraints[0].whenUnsatisfiable=Never", "at '/topologySpreadConstraints/0'"},
		{"volumes need a name", "extraVolumes[0].emptyDir.medium=Memory", "at '/extraVolumes/0': missing property 'name'"},
		{"volume sources", "extraVolumes[0].name=x,extraVolumes[0].emptydir.medium=Memory", "additional properties 'emptydir' not allowed"},
		{"volume mounts need a path", "extraVolumeMounts[0].name=x", "at '/extraVolumeMounts/0': missing property 'mountPath'"},
		{"envFrom sources", "envFrom[0].configMapref.name=x", "at '/envFrom/0': additional properties 'configMapref'"},
		{"env var keys", "extraEnv[0].name=A,extraEnv[0].valu=b", "at '/extraEnv/0': additional properties 'valu'"},
		{"probe keys", "livenessProbe.periodSecond=5", "at '/livenessProbe': additional properties 'periodSecond'"},
		{"probe values", "readinessProbe.periodSeconds=0", "at '/readinessProbe/periodSeconds'"},
		{"alert severities", "prometheusRule.alerts.rolloutGroupStalled.severity=page", "at '/prometheusRule/alerts/rolloutGroupStalled/severity'"},
		{"alert durations", "prometheusRule.alerts.noLeader.for=5min", "at '/prometheusRule/alerts/noLeader/for'"},
		{"unknown alerts", "prometheusRule.alerts.podsDown.enabled=true", "additional properties 'podsDown' not allowed"},
		{"alert selector", "prometheusRule.selector=job", "at '/prometheusRule/selector'"},
		{"runbook URL", "prometheusRule.runbookBaseURL=docs/runbooks.md", "at '/prometheusRule/runbookBaseURL'"},
		{"dashboard namespace", "dashboard.namespace=Monitoring", "at '/dashboard/namespace'"},
		{"aggregated roles switch", "rbac.aggregateToDefaultRoles=maybe", "at '/rbac/aggregateToDefaultRoles'"},
		{"analysis Secret namespaces", "rbac.analysisSecretNamespaces={Team_A}", "at '/rbac/analysisSecretNamespaces/0'"},
		{"cluster-wide analysis Secrets switch", "rbac.analysisSecretsClusterWide=maybe", "at '/rbac/analysisSecretsClusterWide'"},
		{"pod address mode", "podAddress=dns", "at '/podAddress'"},
		{"cluster domain", "clusterDomain=Cluster_Local", "at '/clusterDomain'"},
		{"webhook failure policies", "webhooks.noDownscale.failurePolicy=Deny", "at '/webhooks/noDownscale/failurePolicy'"},
		{"webhook timeout at most 30s", "webhooks.timeoutSeconds=31", "at '/webhooks/timeoutSeconds'"},
		{"webhook port", "webhooks.port=0", "at '/webhooks/port'"},
		{"certificate modes", "webhooks.certificates.mode=vault", "at '/webhooks/certificates/mode'"},
		{"unknown webhook keys", "webhooks.noDownscale.enabled=false", "additional properties 'enabled' not allowed"},
		{"namespace selector keys", "webhooks.namespaceSelector.matchLabel.a=b", "at '/webhooks/namespaceSelector'"},
		{"self-signed validity", "webhooks.certificates.selfSigned.certValidity=1y", "at '/webhooks/certificates/selfSigned/certValidity'"},
		{"issuerRef needs a name", "webhooks.certificates.certManager.issuerRef.kind=ClusterIssuer", "at '/webhooks/certificates/certManager/issuerRef'"},
		{"caBundle is base64", "webhooks.certificates.secret.caBundle=-----BEGIN", "at '/webhooks/certificates/secret/caBundle'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, err := runHelm(t, "template", releaseName, chartDir, "--set", tc.set)
			if err == nil {
				t.Fatalf("--set %s: helm template succeeded, want a schema error", tc.set)
			}
			if !strings.Contains(stderr, "schema") || !strings.Contains(stderr, tc.wantInError) {
				t.Errorf("--set %s: error does not name %q as a schema violation:\n%s", tc.set, tc.wantInError, stderr)
			}
		})
	}
}

func TestSingleReplica(t *testing.T) {
	t.Parallel()
	t.Run("several replicas need leader election", func(t *testing.T) {
		t.Parallel()
		_, stderr, err := runHelm(t, "template", releaseName, chartDir, "--set", "leaderElection.enabled=false")
		if err == nil || !strings.Contains(stderr, "leaderElection.enabled") {
			t.Errorf("replicas=2 without leader election: err=%v, want an error naming leaderElection.enabled\n%s", err, stderr)
		}
	})
	t.Run("one replica without leader election", func(t *testing.T) {
		t.Parallel()
		m := render(t, "--set", "replicas=1", "--set", "leaderElection.enabled=false")
		args := one[appsv1.Deployment](m, "Deployment").Spec.Template.Spec.Containers[0].Args
		if parseArgs(t, args).LeaderElect {
			t.Errorf("args %v: want leader election off", args)
		}
		if n := m.count("PodDisruptionBudget"); n != 0 {
			t.Errorf("%d PodDisruptionBudgets for one replica, want none: it would block node drains", n)
		}
		if perms := permissions(rolesIn(m, releaseNamespace)); slices.ContainsFunc(perms, func(p string) bool { return strings.Contains(p, " leases ") }) {
			t.Errorf("leader election off but the release namespace grants %v", perms)
		}
	})
}

func TestServiceMonitor(t *testing.T) {
	t.Parallel()
	m := render(t, "--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.labels.release=prometheus")
	var sm struct {
		Metadata struct {
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port string `json:"port"`
				Path string `json:"path"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	for _, obj := range m.objs {
		if obj["kind"] == "ServiceMonitor" {
			raw, _ := yaml.Marshal(obj)
			if err := yaml.Unmarshal(raw, &sm); err != nil {
				t.Fatal(err)
			}
		}
	}
	if m.count("ServiceMonitor") != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", m.count("ServiceMonitor"))
	}
	if sm.Metadata.Labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v lack serviceMonitor.labels", sm.Metadata.Labels)
	}
	svc := service(t, m, "echelon-metrics")
	if !selects(sm.Spec.Selector.MatchLabels, svc.Labels) {
		t.Errorf("ServiceMonitor selector %v does not select the metrics Service labels %v", sm.Spec.Selector.MatchLabels, svc.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v, want /metrics on Service port %q", sm.Spec.Endpoints, svc.Spec.Ports[0].Name)
	}
}

func TestTopologySpreadDefaultsToOwnPods(t *testing.T) {
	t.Parallel()
	m := render(t, "--set", "topologySpreadConstraints[0].maxSkew=1",
		"--set", "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
		"--set", "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway")
	pod := one[appsv1.Deployment](m, "Deployment").Spec.Template
	tsc := pod.Spec.TopologySpreadConstraints
	if len(tsc) != 1 || tsc[0].TopologyKey != "topology.kubernetes.io/zone" || tsc[0].LabelSelector == nil {
		t.Fatalf("topologySpreadConstraints = %+v, want the zone constraint with a label selector", tsc)
	}
	if !selects(tsc[0].LabelSelector.MatchLabels, pod.Labels) {
		t.Errorf("default label selector %v does not select the operator pods %v", tsc[0].LabelSelector.MatchLabels, pod.Labels)
	}
}

// parseArgs runs the chart's arguments through the operator's own flag parsing
// and validation, so that a renamed flag or a value the binary refuses fails here
// and not in a crash-looping pod.
func parseArgs(t testing.TB, args []string) options.Options {
	t.Helper()
	opts := options.Default()
	fs := flag.NewFlagSet("echelon", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the operator refuses the chart's args %v: %v", args, err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("args %v: the operator does not take positional arguments %v", args, fs.Args())
	}
	if err := opts.Validate(); err != nil {
		t.Fatalf("the operator refuses the chart's args %v: %v", args, err)
	}
	return opts
}

// TestValuesMatrix renders the chart with each CI values file (namespaced,
// monitoring on, production: CRDs off, pinned digest, zone spread) and checks
// what must hold for every combination: the operator accepts its arguments, the
// pod stays locked down, it reads Secrets only where the values grant it, every
// object is labelled as the release's and lives in the release namespace unless
// it is cluster-scoped or a Role in a watched or granted namespace.
func TestValuesMatrix(t *testing.T) {
	t.Parallel()
	valueFiles, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(valueFiles) < 3 {
		t.Fatalf("ci/*-values.yaml: %v (%d files, want at least namespaced, monitoring and production)", err, len(valueFiles))
	}
	clusterScoped := []string{"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
	for _, values := range valueFiles {
		t.Run(strings.TrimSuffix(filepath.Base(values), "-values.yaml"), func(t *testing.T) {
			t.Parallel()
			m := render(t, "--values", values)
			deploy := one[appsv1.Deployment](m, "Deployment")
			pod := deploy.Spec.Template.Spec
			opts := parseArgs(t, pod.Containers[0].Args)
			assertSecure(t, pod.SecurityContext, pod.Containers[0].SecurityContext)
			assertWebhookWiring(t, m, opts)
			secretNamespaces := assertAnalysisSecretsGranted(t, m, values)
			for _, obj := range m.objs {
				kind, _ := obj["kind"].(string)
				meta, _ := obj["metadata"].(map[string]any)
				labels, _ := meta["labels"].(map[string]any)
				if labels["app.kubernetes.io/instance"] != releaseName || labels["app.kubernetes.io/part-of"] != "echelon" {
					t.Errorf("%s %s: labels %v do not name the release", kind, name(obj), labels)
				}
				ns, _ := meta["namespace"].(string)
				switch {
				case slices.Contains(clusterScoped, kind):
					if ns != "" {
						t.Errorf("cluster-scoped %s %s has namespace %q", kind, name(obj), ns)
					}
				case (kind == "Role" || kind == "RoleBinding") && (slices.Contains(opts.Namespaces, ns) || slices.Contains(secretNamespaces, ns)):
				case ns != releaseNamespace:
					t.Errorf("%s %s is in namespace %q, want the release namespace %s", kind, name(obj), ns, releaseNamespace)
				}
			}
			if deploy.Spec.Replicas != nil && *deploy.Spec.Replicas > 1 && len(pod.TopologySpreadConstraints) == 0 && pod.Affinity == nil {
				t.Errorf("%d replicas with no spread or affinity: they may share a node", *deploy.Spec.Replicas)
			}
		})
	}
}

// rbac.extraRules reach the operator's ClusterRole, or each watched
// namespace's Role: the rights ScalingPolicies need on the resources they follow.
func TestExtraRules(t *testing.T) {
	t.Parallel()
	extra := []string{
		"--set", "rbac.extraRules[0].apiGroups={example.com}",
		"--set", "rbac.extraRules[0].resources={widgets/scale}",
		"--set", "rbac.extraRules[0].verbs={get}",
	}
	want := `"example.com" widgets/scale get *`

	m := render(t, extra...)
	var clusterPerms []string
	for _, cr := range operatorClusterRoles(m) {
		clusterPerms = append(clusterPerms, permissions(cr.Rules)...)
	}
	if !slices.Contains(clusterPerms, want) {
		t.Errorf("ClusterRole grants %v, missing the extra rule %s", clusterPerms, want)
	}

	m = render(t, append(extra, "--set", "watchNamespaces={a,b}")...)
	for _, ns := range []string{"a", "b"} {
		if perms := permissions(rolesIn(m, ns)); !slices.Contains(perms, want) {
			t.Errorf("Role in %s grants %v, missing the extra rule %s", ns, perms, want)
		}
	}
	for _, cr := range operatorClusterRoles(m) {
		if slices.Contains(permissions(cr.Rules), want) {
			t.Errorf("with watchNamespaces the extra rule must not be granted cluster-wide (ClusterRole %s)", cr.Name)
		}
	}

	if _, stderr, err := runHelm(t, "template", "x", chartDir, "--set", "rbac.extraRules[0].verbs={escalate}",
		"--set", "rbac.extraRules[0].resources={widgets}", "--set", "rbac.extraRules[0].apiGroups={x}"); err == nil || !strings.Contains(stderr, "extraRules") {
		t.Errorf("a bad verb in rbac.extraRules was not refused naming the value: err %v, stderr %s", err, stderr)
	}
}
