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
