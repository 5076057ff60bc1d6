package framework

import (
	"os"
	"path/filepath"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/internal/certs"
)

// The generated configurations come out renamed, selecting the namespaces
// asked for, calling the URL asked for, labelled for CA injection, and
// limited to the webhooks kept.
func TestWebhookConfigurations(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "ns1"}}
	url := func(path string) string { return "https://127.0.0.1:9443" + path }

	all, err := WebhookConfigurations(data, "echelon-ns1", "ns1", "tls", sel, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Fatalf("%d configurations, want a validating and a mutating one", len(all))
	}

	only, err := WebhookConfigurations(data, "echelon-ns1", "ns1", "tls", sel, url, func(name string) bool { return name == "eviction.echelon.dev" })
	if err != nil {
		t.Fatal(err)
	}
	if len(only) != 1 {
		t.Fatalf("%d configurations, want only the one holding the eviction webhook", len(only))
	}
	v, ok := only[0].(*admissionregistrationv1.ValidatingWebhookConfiguration)
	if !ok || len(v.Webhooks) != 1 {
		t.Fatalf("want one validating webhook, got %#v", only[0])
	}
	w := v.Webhooks[0]
	if w.ClientConfig.URL == nil || *w.ClientConfig.URL != "https://127.0.0.1:9443/admission/eviction" || w.ClientConfig.Service != nil {
		t.Errorf("client config = %+v, want the loopback URL of /admission/eviction", w.ClientConfig)
	}
	if w.NamespaceSelector != sel {
		t.Errorf("namespace selector = %v, want %v", w.NamespaceSelector, sel)
	}
	if v.Name != "echelon-ns1" || v.Labels[certs.InjectCALabel] != "ns1.tls" {
		t.Errorf("meta = %s %v, want echelon-ns1 labelled %s=ns1.tls", v.Name, v.Labels, certs.InjectCALabel)
	}
}
