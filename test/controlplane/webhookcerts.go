/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import "context"

// WebhookCertRBACFile is the operator's Role on its self-signed webhook
// certificate Secret, relative to the repository root; see GrantWebhookCerts.
const WebhookCertRBACFile = "config/rbac/webhook_cert_role.yaml"

// GrantWebhookCerts binds the user to the operator's webhook certificate Role
// (WebhookCertRBACFile) in namespace, where the operator keeps the Secret of
// its self-signed certificates. The Role names the Secret echelon-webhook-tls,
// the default of --webhook-cert-secret.
func (cp *ControlPlane) GrantWebhookCerts(ctx context.Context, user, namespace string) error {
	return cp.grantRolesIn(ctx, user, WebhookCertRBACFile, namespace)
}

// GrafanaCompatRBACFile is the ClusterRole of what only --grafana-compat
// needs, relative to the repository root; see GrantGrafanaCompat.
const GrafanaCompatRBACFile = "config/rbac/grafana_compat_role.yaml"

// GrantGrafanaCompat binds the user cluster-wide to the compat-only
// ClusterRole (GrafanaCompatRBACFile), as the chart does with grafanaCompat.
func (cp *ControlPlane) GrantGrafanaCompat(ctx context.Context, user string) error {
	objs, err := cp.readObjects(GrafanaCompatRBACFile)
	if err != nil {
		return err
	}
	for _, role := range objs {
		if err := cp.bindRole(ctx, user, GrafanaCompatRBACFile, role); err != nil {
			return err
		}
	}
	return nil
}
