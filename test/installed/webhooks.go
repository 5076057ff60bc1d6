/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package installed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/e2e/framework"
)

// instanceLabel names an installation's objects: the chart puts it on all of
// them, install.yaml included.
const instanceLabel = "app.kubernetes.io/instance"

// The admission webhooks of an installation call the operator through its
// webhook Service, which nothing routes on the test control plane (no
// kube-proxy, no pod network), and with failurePolicy Fail the API server then
// refuses every StatefulSet update in the namespaces they cover. So the
// process started from the Deployment serves the webhooks on a free loopback
// port, its self-signed certificate also names 127.0.0.1, and RouteWebhooks
// points the installation's webhook configurations at that port by URL, the
// one change to what the install created. Everything else is as installed:
// the rules, failure policies, namespace selectors and, in self-signed mode,
// the CA the operator injects itself.

// webhookFlags are the flags StartFromDeployment appends when the Deployment
// runs the webhook server: a free port on loopback, and in self-signed mode a
// certificate that names 127.0.0.1 as well as the Service.
func webhookFlags(args []string) (port int, flags []string, err error) {
	if flagValue(args, "webhook-port") == "0" {
		return 0, nil, nil
	}
	if port, err = framework.FreePort(); err != nil {
		return 0, nil, err
	}
	flags = []string{"--webhook-port=" + strconv.Itoa(port), "--webhook-bind-host=127.0.0.1"}
	if flagValue(args, "tls-cert-file") == "" {
		flags = append(flags, "--webhook-cert-extra-sans=127.0.0.1")
	}
	return port, flags, nil
}

// flagValue returns the value of the last --name=value of args, as the
// operator's flag parsing would take it, or "".
func flagValue(args []string, name string) string {
	v := ""
	for _, a := range args {
		if rest, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			v = rest
		}
	}
	return v
}

// mountSecretVolumes does the kubelet's part for the container's volumes from
// Secrets (the webhook certificate in the chart's certManager and secret
// modes): it writes each Secret's items under dir and returns args with every
// path under the volume's mountPath moved there.
func mountSecretVolumes(ctx context.Context, cs kubernetes.Interface, deploy *appsv1.Deployment, c *corev1.Container, args []string, dir string) ([]string, error) {
	out := slices.Clone(args)
	for _, v := range deploy.Spec.Template.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		var mountPath string
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				mountPath = m.MountPath
			}
		}
		if mountPath == "" {
			continue
		}
		secret, err := cs.CoreV1().Secrets(deploy.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("Secret %s of volume %s: %w", v.Secret.SecretName, v.Name, err)
		}
		local := filepath.Join(dir, "volumes", v.Name)
		items := v.Secret.Items
		if len(items) == 0 {
			for key := range secret.Data {
				items = append(items, corev1.KeyToPath{Key: key, Path: key})
			}
		}
		for _, item := range items {
			data, ok := secret.Data[item.Key]
			if !ok {
				return nil, fmt.Errorf("Secret %s of volume %s has no key %s", secret.Name, v.Name, item.Key)
			}
			p := filepath.Join(local, item.Path)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				return nil, err
			}
			if err := os.WriteFile(p, data, 0o600); err != nil {
				return nil, err
			}
		}
		for i, a := range out {
			if name, value, ok := strings.Cut(a, "="); ok && strings.HasPrefix(value, mountPath+"/") {
				out[i] = name + "=" + local + strings.TrimPrefix(value, mountPath)
			}
		}
	}
	return out, nil
}

// webhookRouteTimeout bounds the wait for the operator to inject its CA into
// the routed configurations; it does so within a second of serving.
const webhookRouteTimeout = time.Minute

// RouteWebhooks sends the webhooks of the installation's configurations (those
// labelled with the Deployment's app.kubernetes.io/instance) to the process's
// loopback port, keeping their path, and waits until each carries a CA bundle
// that verifies the certificate the process serves for 127.0.0.1: from then on
// the API server's calls succeed.
func (o *Operator) RouteWebhooks(ctx context.Context, cs kubernetes.Interface) error {
	if o.WebhookPort == 0 {
		return nil
	}
	selector := metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: map[string]string{instanceLabel: o.instance}})
	url := func(cc *admissionregistrationv1.WebhookClientConfig) {
		path := "/"
		if cc.Service != nil && cc.Service.Path != nil {
			path = *cc.Service.Path
		} else if cc.URL != nil {
			if i := strings.Index(strings.TrimPrefix(*cc.URL, "https://"), "/"); i >= 0 {
				path = strings.TrimPrefix(*cc.URL, "https://")[i:]
			}
		}
		cc.Service = nil
		cc.URL = ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", o.WebhookPort, path))
	}
	var bundles [][]byte
	vwcs := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	mwcs := cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	list, err := vwcs.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	mlist, err := mwcs.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	routed := len(list.Items) + len(mlist.Items)
	for _, item := range list.Items {
		if err := route(ctx, vwcs, item.Name, func(cfg *admissionregistrationv1.ValidatingWebhookConfiguration) {
			for i := range cfg.Webhooks {
				url(&cfg.Webhooks[i].ClientConfig)
			}
		}); err != nil {
			return fmt.Errorf("route ValidatingWebhookConfiguration %s: %w", item.Name, err)
		}
	}
	for _, item := range mlist.Items {
		if err := route(ctx, mwcs, item.Name, func(cfg *admissionregistrationv1.MutatingWebhookConfiguration) {
			for i := range cfg.Webhooks {
				url(&cfg.Webhooks[i].ClientConfig)
			}
		}); err != nil {
			return fmt.Errorf("route MutatingWebhookConfiguration %s: %w", item.Name, err)
		}
	}
	if routed == 0 {
		return fmt.Errorf("the Deployment runs the webhook server but no webhook configuration is labelled %s", selector)
	}

	ctx, cancel := context.WithTimeout(ctx, webhookRouteTimeout)
	defer cancel()
	var why string
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		bundles = bundles[:0]
		v, err := vwcs.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		m, err := mwcs.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		for _, cfg := range v.Items {
			for _, w := range cfg.Webhooks {
				bundles = append(bundles, w.ClientConfig.CABundle)
			}
		}
		for _, cfg := range m.Items {
			for _, w := range cfg.Webhooks {
				bundles = append(bundles, w.ClientConfig.CABundle)
			}
		}
		for _, b := range bundles {
			if why = o.verifyServing(b); why != "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("webhooks routed to 127.0.0.1:%d, but %s: %w\n%s", o.WebhookPort, why, err, o.LogTail(30))
	}
	return nil
}

// configClient is what route needs of the validating or mutating webhook
// configurations' client.
type configClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error)
	Update(ctx context.Context, cfg *T, opts metav1.UpdateOptions) (*T, error)
}

// route applies change to the configuration, again on a conflict with the
// operator injecting its CA meanwhile.
func route[T any](ctx context.Context, c configClient[T], name string, change func(*T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(cfg)
		_, err = c.Update(ctx, cfg, metav1.UpdateOptions{})
		return err
	})
}

// verifyServing says why the API server could not call the process with
// caBundle, or "" if it can: a TLS handshake with 127.0.0.1 at its webhook
// port must verify against the bundle.
func (o *Operator) verifyServing(caBundle []byte) string {
	if len(caBundle) == 0 {
		return "a webhook has no caBundle (not injected yet)"
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) {
		return "a webhook's caBundle holds no PEM certificate"
	}
	d := &net.Dialer{Timeout: time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.WebhookPort)),
		&tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err != nil {
		return "the webhook server does not verify against a caBundle: " + err.Error()
	}
	_ = conn.Close()
	return ""
}
