/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package charts

import (
	"encoding/base64"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/certs"
	"github.com/echelon-operator/echelon/internal/options"
)

// The contract between the chart and the operator's webhook server: the
// paths it serves, the resources and operations each webhook must see.
const (
	noDownscalePath       = "/admission/no-downscale"
	prepareDownscalePath  = "/admission/prepare-downscale"
	validatePath          = "/admission/validate"
	evictionPath          = "/admission/eviction"
	downscaleBudgetPath   = "/admission/downscale-budget"
	holdPartitionPath     = "/admission/hold-partition"
	certManagerInjectFrom = "cert-manager.io/inject-ca-from"
)

// wantWebhook is what one webhook must say with the chart's defaults.
type wantWebhook struct {
	path          string
	failurePolicy admissionregistrationv1.FailurePolicyType
	sideEffects   admissionregistrationv1.SideEffectClass
	group         string
	operations    []admissionregistrationv1.OperationType
	resources     []string
}

var (
	update         = []admissionregistrationv1.OperationType{admissionregistrationv1.Update}
	create         = []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	createOrUpdate = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	validating     = map[string]wantWebhook{
		"no-downscale.echelon.dev": {noDownscalePath, admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNoneOnDryRun, "apps", update,
			[]string{"deployments", "deployments/scale", "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"}},
		"validate.echelon.dev": {validatePath, admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNoneOnDryRun, "echelon.dev", createOrUpdate,
			[]string{"delayeddownscales", "rolloutgroups", "scalingpolicies", "zonedisruptionbudgets"}},
		// Fail: a zone budget must hold while the operator is down (markers.go).
		"eviction.echelon.dev": {evictionPath, admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNoneOnDryRun, "", create,
			[]string{"pods/eviction"}},
		// Fail, like the other downscale rules; its reach is narrowed by
		// selectors instead (assertWebhook).
		"downscale-budget.echelon.dev": {downscaleBudgetPath, admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNoneOnDryRun, "apps", update,
			[]string{"statefulsets"}},
		"scale.downscale-budget.echelon.dev": {downscaleBudgetPath, admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNoneOnDryRun, "apps", update,
			[]string{"statefulsets/scale"}},
	}
	mutating = map[string]wantWebhook{
		"prepare-downscale.echelon.dev": {prepareDownscalePath, admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNoneOnDryRun, "apps", update,
			[]string{"statefulsets", "statefulsets/scale"}},
		// Ignore: failing open disrupts one member at most (markers.go);
		// its reach is narrowed by selectors (assertWebhook).
		"hold-partition.echelon.dev": {holdPartitionPath, admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNone, "apps", update,
			[]string{"statefulsets"}},
	}
)

// webhookConfig is what the two kinds of configuration share, for checks
// that apply to every webhook.
type webhookConfig struct {
	kind     string
	meta     metav1.ObjectMeta
	webhooks []webhook
}

type webhook struct {
	name               string
	clientConfig       admissionregistrationv1.WebhookClientConfig
	rules              []admissionregistrationv1.RuleWithOperations
	failurePolicy      *admissionregistrationv1.FailurePolicyType
	matchPolicy        *admissionregistrationv1.MatchPolicyType
	namespaceSelector  *metav1.LabelSelector
	objectSelector     *metav1.LabelSelector
	sideEffects        *admissionregistrationv1.SideEffectClass
	timeoutSeconds     *int32
	reviewVersions     []string
	reinvocationPolicy *admissionregistrationv1.ReinvocationPolicyType
}

func webhookConfigs(m manifest) []webhookConfig {
	var out []webhookConfig
	for _, vwc := range all[admissionregistrationv1.ValidatingWebhookConfiguration](m, "ValidatingWebhookConfiguration") {
		c := webhookConfig{kind: "ValidatingWebhookConfiguration", meta: vwc.ObjectMeta}
		for _, w := range vwc.Webhooks {
			c.webhooks = append(c.webhooks, webhook{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector,
				w.ObjectSelector, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, nil})
		}
		out = append(out, c)
	}
	for _, mwc := range all[admissionregistrationv1.MutatingWebhookConfiguration](m, "MutatingWebhookConfiguration") {
		c := webhookConfig{kind: "MutatingWebhookConfiguration", meta: mwc.ObjectMeta}
		for _, w := range mwc.Webhooks {
			c.webhooks = append(c.webhooks, webhook{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector,
				w.ObjectSelector, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, w.ReinvocationPolicy})
		}
		out = append(out, c)
	}
	return out
}

// TestWebhooks checks the webhook configurations of the default install
// (self-signed certificates) against the operator's contract: every webhook
// and its rules, failure policy, side effects, match policy, timeout and
// namespace selector; the Service in front of the container port the
// operator's --webhook-port opens; the CA injection label naming the Secret of
// --webhook-cert-secret; and the Role for that Secret.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	m := render(t)
	opts := operatorOptions(t, m)
	if opts.Webhook.Port != 8443 || opts.Webhook.CertFile != "" {
		t.Errorf("operator webhook options %+v: want port 8443 and a self-signed certificate", opts.Webhook)
	}
	configs := webhookConfigs(m)
	if len(configs) != 2 {
		t.Fatalf("%d webhook configurations, want a validating and a mutating one", len(configs))
	}
	got := map[string]bool{}
	for _, c := range configs {
		want := validating
		if c.kind == "MutatingWebhookConfiguration" {
			want = mutating
		}
		if v := c.meta.Labels[certs.InjectCALabel]; v != releaseNamespace+"."+opts.Webhook.CertSecret {
			t.Errorf("%s %s: label %s=%q, want %q (the operator's namespace and --webhook-cert-secret)", c.kind, c.meta.Name, certs.InjectCALabel, v, releaseNamespace+"."+opts.Webhook.CertSecret)
		}
		if _, ok := c.meta.Annotations[certManagerInjectFrom]; ok {
			t.Errorf("%s %s: cert-manager's injection annotation in self-signed mode", c.kind, c.meta.Name)
		}
		for _, w := range c.webhooks {
			got[w.name] = true
			ww, ok := want[w.name]
			if !ok {
				t.Errorf("%s: unexpected webhook %s", c.kind, w.name)
				continue
			}
			assertWebhook(t, w, ww)
			if len(w.clientConfig.CABundle) != 0 {
				t.Errorf("%s: caBundle rendered in self-signed mode: an upgrade would overwrite the injected one", w.name)
			}
			if w.name == "prepare-downscale.echelon.dev" && (w.reinvocationPolicy == nil || *w.reinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy) {
				t.Errorf("%s: reinvocationPolicy %v, want Never: it must not call the pods twice", w.name, w.reinvocationPolicy)
			}
			assertDefaultNamespaceSelector(t, w, nil)
		}
	}
	for name := range validating {
		if !got[name] {
			t.Errorf("no webhook %s", name)
		}
	}
	for name := range mutating {
		if !got[name] {
			t.Errorf("no webhook %s", name)
		}
	}
	assertWebhookWiring(t, m, opts)
	assertWebhookCertRBAC(t, m, opts.Webhook.CertSecret)
	if n := m.count("Certificate") + m.count("Issuer"); n != 0 {
		t.Errorf("%d cert-manager objects in self-signed mode", n)
	}
	if vols := webhookVolumes(m); len(vols) != 0 {
		t.Errorf("volumes %v from Secrets in self-signed mode: the operator reads its Secret through the API", vols)
	}
}

func assertWebhook(t *testing.T, w webhook, want wantWebhook) {
	t.Helper()
	if svc := w.clientConfig.Service; svc == nil || svc.Path == nil || *svc.Path != want.path || svc.Port == nil || *svc.Port != 443 || w.clientConfig.URL != nil {
		t.Errorf("%s: clientConfig %+v, want the webhook Service's port 443, path %s", w.name, w.clientConfig, want.path)
	}
	if w.failurePolicy == nil || *w.failurePolicy != want.failurePolicy {
		t.Errorf("%s: failurePolicy %v, want %s", w.name, deref(w.failurePolicy), want.failurePolicy)
	}
	if w.sideEffects == nil || *w.sideEffects != want.sideEffects {
		t.Errorf("%s: sideEffects %v, want %s", w.name, deref(w.sideEffects), want.sideEffects)
	}
	if w.matchPolicy == nil || *w.matchPolicy != admissionregistrationv1.Equivalent {
		t.Errorf("%s: matchPolicy %v, want Equivalent (requests through another version of the resource too)", w.name, deref(w.matchPolicy))
	}
	if w.timeoutSeconds == nil || *w.timeoutSeconds != 10 {
		t.Errorf("%s: timeoutSeconds %v, want 10", w.name, deref(w.timeoutSeconds))
	}
	if !slices.Equal(w.reviewVersions, []string{"v1"}) {
		t.Errorf("%s: admissionReviewVersions %v, want [v1]", w.name, w.reviewVersions)
	}
	if len(w.rules) != 1 {
		t.Fatalf("%s: %d rules, want 1", w.name, len(w.rules))
	}
	r := w.rules[0]
	// Only downscale-budget's StatefulSet rule is narrowed to the members a
	// budget judges, by their label, and hold-partition's to the members
	// whose partition a group holds.
	wantSelector := (*metav1.LabelSelector)(nil)
	switch w.name {
	case "downscale-budget.echelon.dev":
		wantSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: v1alpha1.MemberLabel, Operator: metav1.LabelSelectorOpExists}}}
	case "hold-partition.echelon.dev":
		wantSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: v1alpha1.PartitionHolderLabel, Operator: metav1.LabelSelectorOpExists}}}
	}
	if !reflect.DeepEqual(w.objectSelector, wantSelector) {
		t.Errorf("%s: objectSelector %+v, want %+v", w.name, w.objectSelector, wantSelector)
	}
	if w.objectSelector != nil && slices.ContainsFunc(r.Resources, func(res string) bool { return strings.HasSuffix(res, "/scale") }) {
		t.Errorf("%s: objectSelector on a /scale rule: /scale requests carry no labels, so it would let `kubectl scale` through", w.name)
	}
	resources := slices.Sorted(slices.Values(r.Resources))
	if !slices.Equal(r.APIGroups, []string{want.group}) || !slices.Equal(resources, want.resources) || !slices.Equal(r.Operations, want.operations) {
		t.Errorf("%s: rule %+v, want group %s resources %v operations %v", w.name, r, want.group, want.resources, want.operations)
	}
}

// assertDefaultNamespaceSelector checks the default selector: every namespace
// but kube-system and the release's, and with watchNamespaces only those.
func assertDefaultNamespaceSelector(t *testing.T, w webhook, watched []string) {
	t.Helper()
	want := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", releaseNamespace},
	}}}
	if len(watched) > 0 {
		want.MatchExpressions = append(want.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: watched,
		})
	}
	if !reflect.DeepEqual(w.namespaceSelector, want) {
		t.Errorf("%s: namespaceSelector %+v, want %+v", w.name, w.namespaceSelector, want)
	}
}

// assertWebhookWiring checks, for any values, that every webhook reaches the
// operator: its Service is rendered in the release namespace, selects the
// operator pods and forwards port 443 to the container port named by its
// targetPort, which is the port of --webhook-port. In the file modes, the
// certificate files are in a volume from the Secret, and the operator may not
// also keep a self-signed one.
func assertWebhookWiring(t *testing.T, m manifest, opts options.Options) {
	t.Helper()
	deploy := one[appsv1.Deployment](m, "Deployment")
	c := deploy.Spec.Template.Spec.Containers[0]
	configs := webhookConfigs(m)
	if opts.Webhook.Port == 0 {
		if len(configs) != 0 {
			t.Errorf("%d webhook configurations with the webhook server off: the API server would call nothing", len(configs))
		}
		return
	}
	for _, cfg := range configs {
		for _, w := range cfg.webhooks {
			ref := w.clientConfig.Service
			if ref == nil {
				t.Errorf("%s: no Service in clientConfig", w.name)
				continue
			}
			svc := service(t, m, ref.Name)
			if ref.Namespace != releaseNamespace || svc.Namespace != releaseNamespace {
				t.Errorf("%s: Service %s/%s, want it in the release namespace", w.name, ref.Namespace, ref.Name)
			}
			if !selects(svc.Spec.Selector, deploy.Spec.Template.Labels) {
				t.Errorf("Service %s selector %v does not select the operator pods %v", svc.Name, svc.Spec.Selector, deploy.Spec.Template.Labels)
			}
			var target string
			for _, p := range svc.Spec.Ports {
				if ref.Port != nil && p.Port == *ref.Port {
					target = p.TargetPort.String()
				}
			}
			var containerPort int32
			for _, p := range c.Ports {
				if p.Name == target {
					containerPort = p.ContainerPort
				}
			}
			if containerPort == 0 || int(containerPort) != opts.Webhook.Port {
				t.Errorf("%s: Service %s port %v goes to container port %q (%d), want the operator's --webhook-port %d", w.name, svc.Name, deref(ref.Port), target, containerPort, opts.Webhook.Port)
			}
		}
	}
	if opts.Webhook.CertFile == "" {
		if opts.Webhook.Service != webhookService(t, m) {
			t.Errorf("--webhook-service=%s, but the webhooks call Service %s: the self-signed certificate would not name it", opts.Webhook.Service, webhookService(t, m))
		}
		for _, cfg := range configs {
			if want := releaseNamespace + "." + opts.Webhook.CertSecret; cfg.meta.Labels[certs.InjectCALabel] != want {
				t.Errorf("%s: label %s=%q, want %q: the operator would not inject its CA", cfg.kind, certs.InjectCALabel, cfg.meta.Labels[certs.InjectCALabel], want)
			}
		}
		return
	}
	for _, cfg := range configs {
		if v, ok := cfg.meta.Labels[certs.InjectCALabel]; ok {
			t.Errorf("%s: label %s=%q although the certificate comes from files", cfg.kind, certs.InjectCALabel, v)
		}
	}
	vols := webhookVolumes(m)
	for _, file := range []string{opts.Webhook.CertFile, opts.Webhook.KeyFile} {
		found := false
		for _, mount := range c.VolumeMounts {
			if rel, err := filepath.Rel(mount.MountPath, file); err == nil && !strings.HasPrefix(rel, "..") && vols[mount.Name] != "" {
				found = true
				if mount.SubPath != "" {
					t.Errorf("%s is mounted with subPath: the kubelet never updates it, so a renewed certificate would not reach the operator", file)
				}
			}
		}
		if !found {
			t.Errorf("--tls-cert-file/--tls-key-file %s is in no volume from a Secret (mounts %+v)", file, c.VolumeMounts)
		}
	}
	if len(rolesFor(m, "secrets")) != 0 {
		t.Error("a Role for Secrets although the certificate comes from files")
	}
}

// operatorOptions parses the rendered Deployment's arguments with the
// operator's own flags.
func operatorOptions(t *testing.T, m manifest) options.Options {
	t.Helper()
	return parseArgs(t, one[appsv1.Deployment](m, "Deployment").Spec.Template.Spec.Containers[0].Args)
}

// service returns the rendered Service of that name.
func service(t testing.TB, m manifest, name string) *corev1.Service {
	t.Helper()
	for _, svc := range all[corev1.Service](m, "Service") {
		if svc.Name == name {
			return svc
		}
	}
	t.Fatalf("no Service %s rendered", name)
	return nil
}

// webhookService is the Service every webhook calls.
func webhookService(t *testing.T, m manifest) string {
	t.Helper()
	names := map[string]bool{}
	for _, cfg := range webhookConfigs(m) {
		for _, w := range cfg.webhooks {
			if w.clientConfig.Service != nil {
				names[w.clientConfig.Service.Name] = true
			}
		}
	}
	if len(names) != 1 {
		t.Fatalf("webhooks call Services %v, want one", names)
	}
	for n := range names {
		return n
	}
	return ""
}

// webhookVolumes maps the operator pod's volumes from Secrets to their Secret.
func webhookVolumes(m manifest) map[string]string {
	out := map[string]string{}
	for _, v := range one[appsv1.Deployment](m, "Deployment").Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			out[v.Name] = v.Secret.SecretName
		}
	}
	return out
}

// rolesFor returns the release namespace's permissions on a core resource.
func rolesFor(m manifest, resource string) []string {
	var out []string
	for _, p := range permissions(rolesIn(m, releaseNamespace)) {
		if strings.HasPrefix(p, `"" `+resource+" ") {
			out = append(out, p)
		}
	}
	return out
}

// assertWebhookCertRBAC checks that the release namespace grants exactly the
// rules of config/rbac/webhook_cert_role.yaml on Secrets, for the chart's
// Secret name, bound to the operator.
func assertWebhookCertRBAC(t *testing.T, m manifest, secret string) {
	t.Helper()
	configSecret := options.Default().Webhook.CertSecret
	var want []string
	for _, p := range permissions(configRoleRules(t, "webhook_cert_role.yaml")) {
		want = append(want, strings.Replace(p, " "+configSecret, " "+secret, 1))
	}
	if got := rolesFor(m, "secrets"); !slices.Equal(got, want) {
		t.Errorf("release namespace grants on Secrets\n%s\nwant (config/rbac/webhook_cert_role.yaml for Secret %s)\n%s", strings.Join(got, "\n"), secret, strings.Join(want, "\n"))
	}
	sa := one[corev1.ServiceAccount](m, "ServiceAccount")
	for _, r := range all[rbacv1.Role](m, "Role") {
		if r.Namespace != releaseNamespace || len(r.Rules) == 0 || !slices.Contains(r.Rules[0].Resources, "secrets") {
			continue
		}
		bound := false
		for _, rb := range all[rbacv1.RoleBinding](m, "RoleBinding") {
			if rb.Namespace == releaseNamespace && rb.RoleRef.Name == r.Name {
				assertBinding(t, rb.RoleRef, rb.Subjects, "Role", r.Name, sa)
				bound = true
			}
		}
		if !bound {
			t.Errorf("Role %s is not bound", r.Name)
		}
	}
}

// untyped returns the rendered objects of a kind the tests have no Go type
// for (cert-manager's), by name.
func untyped(m manifest, kind string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, obj := range m.objs {
		if obj["kind"] == kind {
			meta, _ := obj["metadata"].(map[string]any)
			n, _ := meta["name"].(string)
			out[n] = obj
		}
	}
	return out
}

func field(obj map[string]any, path ...string) any {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// TestWebhooksCertManager: cert-manager issues the serving certificate into
// the Secret the operator mounts and reads with --tls-cert-file and
// --tls-key-file, and its cainjector fills the configurations named by their
// annotation. Without an issuerRef the chart makes a CA chain.
func TestWebhooksCertManager(t *testing.T) {
	t.Parallel()
	m := render(t, "--set", "webhooks.certificates.mode=certManager")
	opts := operatorOptions(t, m)
	if opts.Webhook.CertFile == "" || opts.Webhook.KeyFile == "" {
		t.Fatalf("webhook options %+v: want the certificate from files", opts.Webhook)
	}
	assertWebhookWiring(t, m, opts)
	certificates := untyped(m, "Certificate")
	issuers := untyped(m, "Issuer")
	svc := webhookService(t, m)
	for _, c := range webhookConfigs(m) {
		if _, ok := c.meta.Labels[certs.InjectCALabel]; ok {
			t.Errorf("%s: label %s in certManager mode: the operator and cert-manager would both inject", c.kind, certs.InjectCALabel)
		}
		ns, name, _ := strings.Cut(c.meta.Annotations[certManagerInjectFrom], "/")
		if ns != releaseNamespace || certificates[name] == nil {
			t.Errorf("%s: annotation %s=%q does not name a Certificate of the chart", c.kind, certManagerInjectFrom, c.meta.Annotations[certManagerInjectFrom])
			continue
		}
		serving := certificates[name]
		secret, _ := field(serving, "spec", "secretName").(string)
		if !slices.Contains(slices.Collect(maps.Values(webhookVolumes(m))), secret) {
			t.Errorf("Certificate %s writes Secret %q, which the operator does not mount (%v)", name, secret, webhookVolumes(m))
		}
		dnsNames, _ := field(serving, "spec", "dnsNames").([]any)
		for _, want := range []string{svc + "." + releaseNamespace + ".svc", svc + "." + releaseNamespace + ".svc.cluster.local"} {
			if !slices.Contains(dnsNames, any(want)) {
				t.Errorf("Certificate %s names %v, missing %s (what the API server calls)", name, dnsNames, want)
			}
		}
		// The chain: a CA Issuer from the CA Certificate's Secret, which a
		// self-signed Issuer signs.
		caIssuer := issuers[field(serving, "spec", "issuerRef", "name").(string)]
		caSecret, _ := field(caIssuer, "spec", "ca", "secretName").(string)
		var ca map[string]any
		for _, c := range certificates {
			if field(c, "spec", "secretName") == caSecret && field(c, "spec", "isCA") == true {
				ca = c
			}
		}
		if ca == nil {
			t.Fatalf("the serving Certificate's issuer %v is not a CA Issuer of a CA Certificate of the chart", field(serving, "spec", "issuerRef"))
		}
		root := issuers[field(ca, "spec", "issuerRef", "name").(string)]
		if field(root, "spec", "selfSigned") == nil {
			t.Errorf("the CA Certificate is issued by %v, want the chart's self-signed Issuer", field(ca, "spec", "issuerRef"))
		}
	}

	t.Run("issuerRef", func(t *testing.T) {
		t.Parallel()
		m := render(t, "--set", "webhooks.certificates.mode=certManager",
			"--set", "webhooks.certificates.certManager.issuerRef.name=corp-ca",
			"--set", "webhooks.certificates.certManager.issuerRef.kind=ClusterIssuer")
		certificates := untyped(m, "Certificate")
		if len(certificates) != 1 || len(untyped(m, "Issuer")) != 0 {
			t.Fatalf("%d Certificates and %d Issuers with an issuerRef, want only the serving Certificate", len(certificates), len(untyped(m, "Issuer")))
		}
		for _, c := range certificates {
			if ref := field(c, "spec", "issuerRef"); !reflect.DeepEqual(ref, map[string]any{"name": "corp-ca", "kind": "ClusterIssuer"}) {
				t.Errorf("serving Certificate issuerRef %v, want the values' corp-ca ClusterIssuer", ref)
			}
		}
	})
}

// TestWebhooksProvidedSecret: a Secret the user provides is mounted and its CA
// given to the API server in every webhook's caBundle.
func TestWebhooksProvidedSecret(t *testing.T) {
	t.Parallel()
	pem := "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	bundle := base64.StdEncoding.EncodeToString([]byte(pem))
	m := render(t, "--set", "webhooks.certificates.mode=secret", "--set", "webhooks.certificates.secret.name=my-webhook-tls",
		"--set", "webhooks.certificates.secret.caBundle="+bundle)
	opts := operatorOptions(t, m)
	assertWebhookWiring(t, m, opts)
	if !slices.Contains(slices.Collect(maps.Values(webhookVolumes(m))), "my-webhook-tls") {
		t.Errorf("volumes %v: the provided Secret my-webhook-tls is not mounted", webhookVolumes(m))
	}
	for _, c := range webhookConfigs(m) {
		if len(c.meta.Annotations) > 0 || c.meta.Labels[certs.InjectCALabel] != "" {
			t.Errorf("%s: injection label or annotation %v %v with a provided Secret", c.kind, c.meta.Labels, c.meta.Annotations)
		}
		for _, w := range c.webhooks {
			if string(w.clientConfig.CABundle) != pem {
				t.Errorf("%s: caBundle %q, want the values' CA", w.name, w.clientConfig.CABundle)
			}
		}
	}
	if n := m.count("Certificate") + m.count("Issuer"); n != 0 {
		t.Errorf("%d cert-manager objects with a provided Secret", n)
	}

	for set, wantInError := range map[string]string{
		"webhooks.certificates.secret.caBundle=" + bundle:  "webhooks.certificates.secret.name",
		"webhooks.certificates.secret.name=my-webhook-tls": "webhooks.certificates.secret.caBundle",
	} {
		_, stderr, err := runHelm(t, "template", releaseName, chartDir, "--set", "webhooks.certificates.mode=secret", "--set", set)
		if err == nil || !strings.Contains(stderr, wantInError) {
			t.Errorf("mode secret with only --set %s: err %v, want an error naming %s\n%s", set, err, wantInError, stderr)
		}
	}
}

// TestWebhooksDisabled: no webhook objects, and the operator serves none.
func TestWebhooksDisabled(t *testing.T) {
	t.Parallel()
	m := render(t, "--set", "webhooks.enabled=false")
	opts := operatorOptions(t, m)
	if opts.Webhook.Port != 0 {
		t.Errorf("--webhook-port=%d with webhooks.enabled=false, want 0 (server off)", opts.Webhook.Port)
	}
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "Certificate", "Issuer"} {
		if n := m.count(kind); n != 0 {
			t.Errorf("%d %s with webhooks.enabled=false", n, kind)
		}
	}
	if svcs := all[corev1.Service](m, "Service"); len(svcs) != 1 {
		t.Errorf("%d Services with webhooks.enabled=false, want only the metrics Service", len(svcs))
	}
	if perms := rolesFor(m, "secrets"); len(perms) != 0 {
		t.Errorf("Secret permissions %v with webhooks.enabled=false", perms)
	}
	for _, p := range one[appsv1.Deployment](m, "Deployment").Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "webhook" {
			t.Errorf("container port %+v with webhooks.enabled=false", p)
		}
	}
}

// TestWebhooksValues: the values reach every webhook.
func TestWebhooksValues(t *testing.T) {
	t.Parallel()
	m := render(t, "--set", "webhooks.timeoutSeconds=25", "--set", "webhooks.port=9443",
		"--set", "webhooks.noDownscale.failurePolicy=Ignore", "--set", "webhooks.prepareDownscale.failurePolicy=Ignore",
		"--set", "webhooks.validation.failurePolicy=Fail", "--set", "webhooks.eviction.failurePolicy=Ignore",
		"--set", "webhooks.downscaleBudget.failurePolicy=Ignore", "--set", "webhooks.holdPartition.failurePolicy=Fail",
		"--set", "webhooks.namespaceSelector.matchLabels.team=a",
		"--set", "webhooks.certificates.selfSigned.secretName=custom-tls", "--set", "fullnameOverride=edge")
	opts := operatorOptions(t, m)
	if opts.Webhook.Port != 9443 || opts.Webhook.CertSecret != "custom-tls" || opts.Webhook.Service != "edge-webhook" || opts.Webhook.ValidateFailurePolicy != "Fail" ||
		opts.Webhook.DownscaleBudgetFailurePolicy != "Ignore" {
		t.Errorf("webhook options %+v, want port 9443, Secret custom-tls, Service edge-webhook, validation failure policy Fail, downscale-budget Ignore", opts.Webhook)
	}
	assertWebhookWiring(t, m, opts)
	assertWebhookCertRBAC(t, m, "custom-tls")
	want := map[string]admissionregistrationv1.FailurePolicyType{
		"no-downscale.echelon.dev": admissionregistrationv1.Ignore, "prepare-downscale.echelon.dev": admissionregistrationv1.Ignore, "validate.echelon.dev": admissionregistrationv1.Fail,
		"eviction.echelon.dev": admissionregistrationv1.Ignore, "downscale-budget.echelon.dev": admissionregistrationv1.Ignore,
		"scale.downscale-budget.echelon.dev": admissionregistrationv1.Ignore, "hold-partition.echelon.dev": admissionregistrationv1.Fail,
	}
	for _, c := range webhookConfigs(m) {
		if v := c.meta.Labels[certs.InjectCALabel]; v != releaseNamespace+".custom-tls" {
			t.Errorf("%s: injection label %q, want %s.custom-tls", c.kind, v, releaseNamespace)
		}
		for _, w := range c.webhooks {
			if deref(w.timeoutSeconds) != 25 || deref(w.failurePolicy) != want[w.name] {
				t.Errorf("%s: timeoutSeconds %d failurePolicy %s, want 25 and %s", w.name, deref(w.timeoutSeconds), deref(w.failurePolicy), want[w.name])
			}
			if !reflect.DeepEqual(w.namespaceSelector, &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}) {
				t.Errorf("%s: namespaceSelector %+v, want the values' selector instead of the default", w.name, w.namespaceSelector)
			}
		}
	}

	t.Run("eviction", func(t *testing.T) {
		t.Parallel()
		m := render(t, "--set", "webhooks.eviction.namespaceSelector.matchLabels.budgets=zones")
		found := false
		for _, c := range webhookConfigs(m) {
			for _, w := range c.webhooks {
				if w.name != "eviction.echelon.dev" {
					assertDefaultNamespaceSelector(t, w, nil)
					continue
				}
				found = true
				if !reflect.DeepEqual(w.namespaceSelector, &metav1.LabelSelector{MatchLabels: map[string]string{"budgets": "zones"}}) {
					t.Errorf("%s: namespaceSelector %+v, want webhooks.eviction.namespaceSelector", w.name, w.namespaceSelector)
				}
			}
		}
		if !found {
			t.Error("no eviction webhook")
		}

		m = render(t, "--set", "webhooks.eviction.enabled=false")
		var names []string
		for _, c := range webhookConfigs(m) {
			for _, w := range c.webhooks {
				names = append(names, w.name)
			}
		}
		slices.Sort(names)
		if want := []string{"downscale-budget.echelon.dev", "hold-partition.echelon.dev", "no-downscale.echelon.dev", "prepare-downscale.echelon.dev",
			"scale.downscale-budget.echelon.dev", "validate.echelon.dev"}; !slices.Equal(names, want) {
			t.Errorf("webhooks %v with webhooks.eviction.enabled=false, want %v", names, want)
		}
	})

	t.Run("watchNamespaces", func(t *testing.T) {
		t.Parallel()
		m := render(t, "--set", "watchNamespaces={team-a,team-b}")
		for _, c := range webhookConfigs(m) {
			for _, w := range c.webhooks {
				assertDefaultNamespaceSelector(t, w, []string{"team-a", "team-b"})
			}
		}
	})
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// TestWebhooksMatchGenerated checks that the chart's default webhooks, for a
// release echelon in echelon-system, are those config/webhook/manifests.yaml
// has, which `make manifests` generates from the markers next to the
// handlers: a webhook, rule or setting added there reaches the chart, or this
// fails. Only what the chart adds differs: labels, the Service port (443, the
// default the generated file leaves out) and the cluster-wide defaults the
// API server fills in anyway.
func TestWebhooksMatchGenerated(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := render(t)
	generated := manifest{t: t}
	for _, doc := range strings.Split(string(raw), "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if obj != nil {
			generated.objs = append(generated.objs, obj)
		}
	}
	validating := func(m manifest) []admissionregistrationv1.ValidatingWebhook {
		return one[admissionregistrationv1.ValidatingWebhookConfiguration](m, "ValidatingWebhookConfiguration").Webhooks
	}
	mutating := func(m manifest) []admissionregistrationv1.MutatingWebhook {
		return one[admissionregistrationv1.MutatingWebhookConfiguration](m, "MutatingWebhookConfiguration").Webhooks
	}
	assertSameWebhooks(t, "validating", validating(m), validating(generated), func(w *admissionregistrationv1.ValidatingWebhook) *admissionregistrationv1.WebhookClientConfig {
		return &w.ClientConfig
	})
	assertSameWebhooks(t, "mutating", mutating(m), mutating(generated), func(w *admissionregistrationv1.MutatingWebhook) *admissionregistrationv1.WebhookClientConfig {
		return &w.ClientConfig
	})
}

// assertSameWebhooks compares the chart's webhooks with the generated ones,
// once their client configurations are normalized: no caBundle, and the
// Service port the API server defaults to.
func assertSameWebhooks[W any](t *testing.T, kind string, got, want []W, clientConfig func(*W) *admissionregistrationv1.WebhookClientConfig) {
	t.Helper()
	for _, list := range [][]W{got, want} {
		for i := range list {
			cc := clientConfig(&list[i])
			cc.CABundle = nil
			if cc.Service != nil && cc.Service.Port == nil {
				cc.Service.Port = ptr.To[int32](443)
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chart's %s webhooks differ from config/webhook/manifests.yaml\n got: %+v\nwant: %+v", kind, got, want)
	}
}

// The operator patches only its own webhook configurations (to inject the CA):
// patch is limited to their names, which follow the release, while list and
// watch, which cannot be limited by name, stay unrestricted for the informers.
func TestWebhookConfigurationRBACNamesTheRelease(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "all namespaces", args: []string{"--set", "fullnameOverride=other-echelon"}},
		{name: "some namespaces", args: []string{"--set", "fullnameOverride=other-echelon", "--set", "watchNamespaces={a,b}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := render(t, tc.args...)
			names := map[string][]string{}
			for _, c := range all[admissionregistrationv1.ValidatingWebhookConfiguration](m, "ValidatingWebhookConfiguration") {
				names["validatingwebhookconfigurations"] = append(names["validatingwebhookconfigurations"], c.Name)
			}
			for _, c := range all[admissionregistrationv1.MutatingWebhookConfiguration](m, "MutatingWebhookConfiguration") {
				names["mutatingwebhookconfigurations"] = append(names["mutatingwebhookconfigurations"], c.Name)
			}
			var perms []string
			for _, cr := range operatorClusterRoles(m) {
				for _, r := range cr.Rules {
					if !slices.Contains(r.APIGroups, admissionregistrationv1.GroupName) {
						continue
					}
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							if (v == "list" || v == "watch") && len(r.ResourceNames) > 0 {
								t.Errorf("%s on %s limited to %v: an informer cannot list by name", v, res, r.ResourceNames)
							}
							if (v == "patch" || v == "update" || v == "*") && !slices.Equal(r.ResourceNames, names[res]) {
								t.Errorf("%s on %s for names %v, want exactly the release's configurations %v", v, res, r.ResourceNames, names[res])
							}
							perms = append(perms, v+" "+res)
						}
					}
				}
			}
			for _, want := range []string{"patch validatingwebhookconfigurations", "patch mutatingwebhookconfigurations",
				"list validatingwebhookconfigurations", "watch mutatingwebhookconfigurations"} {
				if !slices.Contains(perms, want) {
					t.Errorf("the operator's ClusterRole lacks %s (granted: %v)", want, perms)
				}
			}
		})
	}
}
