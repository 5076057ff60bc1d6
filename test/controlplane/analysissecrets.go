/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import "context"

// AnalysisSecretsRBACFile is the Role that lets the operator read the Secrets
// of RolloutGroups' analysis (spec.analysis.prometheus.authSecretRef and
// tls.caSecretRef) in one namespace, relative to the repository root; see
// GrantAnalysisSecrets.
const AnalysisSecretsRBACFile = "config/rbac/analysis_secrets_role.yaml"

// GrantAnalysisSecrets binds the user to the analysis Secrets Role
// (AnalysisSecretsRBACFile) in namespace, as an installer opts a namespace in.
// The operator's generated RBAC grants no right on Secrets, so without it a
// group's analysis cannot read its credentials there.
func (cp *ControlPlane) GrantAnalysisSecrets(ctx context.Context, user, namespace string) error {
	return cp.grantRolesIn(ctx, user, AnalysisSecretsRBACFile, namespace)
}
