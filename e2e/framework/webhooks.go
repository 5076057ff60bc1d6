package framework

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/echelon-operator/echelon/internal/certs"
)

// WebhookConfigurations turns the webhook configurations `make manifests`
// generates (config/webhook/manifests.yaml, which the chart mirrors: failure
// policies, side effects, match policy, timeouts) into ones a test can
// install beside others, changed only where it must: named name, selecting
// the namespaces nsSelector selects, calling the operator at url(path)
// instead of a Service, and labelled for CA injection from the operator's
// certificate Secret (certNamespace/certSecret). keep, when not nil, picks
// the webhooks to install by name; a configuration left without webhooks is
// dropped.
func WebhookConfigurations(manifests []byte, name, certNamespace, certSecret string, nsSelector *metav1.LabelSelector,
	url func(path string) string, keep func(webhook string) bool) ([]client.Object, error) {
	meta := metav1.ObjectMeta{Name: name, Labels: map[string]string{certs.InjectCALabel: certNamespace + "." + certSecret}}
	redirect := func(cc *admissionregistrationv1.WebhookClientConfig) error {
		if cc.Service == nil || cc.Service.Path == nil {
			return fmt.Errorf("webhook configuration %s: a webhook without a service path", name)
		}
		u := url(*cc.Service.Path)
		*cc = admissionregistrationv1.WebhookClientConfig{URL: &u}
		return nil
	}
	kept := func(webhook string) bool { return keep == nil || keep(webhook) }
	var objs []client.Object
	for _, doc := range strings.Split(string(manifests), "\n---\n") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
			continue
		}
		switch {
		case strings.Contains(doc, "kind: MutatingWebhookConfiguration"):
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict([]byte(doc), m); err != nil {
				return nil, err
			}
			m.ObjectMeta = meta
			hooks, err := rewriteWebhooks(m.Webhooks, func(w *admissionregistrationv1.MutatingWebhook) (string, *admissionregistrationv1.WebhookClientConfig, **metav1.LabelSelector) {
				return w.Name, &w.ClientConfig, &w.NamespaceSelector
			}, kept, redirect, nsSelector)
			if err != nil {
				return nil, err
			}
			if m.Webhooks = hooks; len(hooks) > 0 {
				objs = append(objs, m)
			}
		case strings.Contains(doc, "kind: ValidatingWebhookConfiguration"):
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
				return nil, err
			}
			v.ObjectMeta = meta
			hooks, err := rewriteWebhooks(v.Webhooks, func(w *admissionregistrationv1.ValidatingWebhook) (string, *admissionregistrationv1.WebhookClientConfig, **metav1.LabelSelector) {
				return w.Name, &w.ClientConfig, &w.NamespaceSelector
			}, kept, redirect, nsSelector)
			if err != nil {
				return nil, err
			}
			if v.Webhooks = hooks; len(hooks) > 0 {
				objs = append(objs, v)
			}
		}
	}
	return objs, nil
}

// rewriteWebhooks keeps the webhooks kept picks, each redirected and
// selecting nsSelector; fields gives a webhook's name, client config and
// namespace selector (mutating and validating webhooks are distinct types).
func rewriteWebhooks[W any](hooks []W, fields func(*W) (string, *admissionregistrationv1.WebhookClientConfig, **metav1.LabelSelector),
	kept func(string) bool, redirect func(*admissionregistrationv1.WebhookClientConfig) error, nsSelector *metav1.LabelSelector) ([]W, error) {
	var out []W
	for i := range hooks {
		name, cc, sel := fields(&hooks[i])
		if !kept(name) {
			continue
		}
		if err := redirect(cc); err != nil {
			return nil, err
		}
		*sel = nsSelector
		out = append(out, hooks[i])
	}
	return out, nil
}

// CAInjected reports whether every webhook of the installed configurations
// objs carries a CA bundle: the operator has injected its CA, and the API
// server can call it.
func CAInjected(ctx context.Context, c client.Client, objs []client.Object) error {
	for _, o := range objs {
		var bundles [][]byte
		switch o.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), v); err != nil {
				return err
			}
			for _, w := range v.Webhooks {
				bundles = append(bundles, w.ClientConfig.CABundle)
			}
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), m); err != nil {
				return err
			}
			for _, w := range m.Webhooks {
				bundles = append(bundles, w.ClientConfig.CABundle)
			}
		}
		for _, b := range bundles {
			if len(b) == 0 {
				return fmt.Errorf("no CA injected into %s yet", o.GetName())
			}
		}
	}
	return nil
}

// WaitCAInjected waits up to timeout for CAInjected.
func WaitCAInjected(ctx context.Context, c client.Client, objs []client.Object, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := CAInjected(ctx, c, objs)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
