#!/usr/bin/env bash
# Regenerates the parts of charts/echelon that come from controller-gen output:
# the CRD templates (templates/crds/) and the operator's RBAC rules
# (templates/_rbac_rules.tpl). `make manifests` runs it after controller-gen, and
# `make verify` diffs the result, so the chart never drifts from the API types or
# the +kubebuilder:rbac markers.
#
# The work is done by hack/chartsync, in Go: it parses the YAML to check what it
# copies and to split the RBAC rules by scope, which sed and awk cannot do safely.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
exec go run ./hack/chartsync \
  -crds config/crd/bases \
  -role config/rbac/role.yaml \
  -chart charts/echelon
