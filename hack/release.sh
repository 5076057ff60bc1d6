#!/usr/bin/env bash
# Writes Echelon's release artifacts into one directory (`make release`: dist/):
#
#   echelon-image-<version>.oci.tar   the multi-arch image (linux/amd64, linux/arm64)
#                                     as an OCI archive, from `make image`
#   echelon-image-<version>.digest    the digest of that image index, to pin it
#   echelon-<version>.tgz             the packaged Helm chart; `helm push` makes it
#                                     an OCI artifact
#   install.yaml                      for `kubectl apply` without Helm: the namespace,
#                                     CRDs, RBAC, Deployment, metrics Service and
#                                     PodDisruptionBudget, rendered from the chart
#   prometheus-rules.yaml             the chart's PrometheusRule, for clusters running
#                                     the Prometheus Operator without Helm
#   grafana-dashboard.json            the chart's Grafana dashboard, for import
#   SHA256SUMS                        checksums of all of the above
#
# Nothing here touches the network. Publishing (pushing the image and the chart)
# is left to a CI job with registry credentials; see docs/install.md.
#
# Usage: hack/release.sh --helm PATH --dist DIR --version VERSION
#                        [--repository REPO] [--image-archive PATH --image-digest DIGEST]
#                        [--manifests-only]
#   --manifests-only writes install.yaml, prometheus-rules.yaml and
#   grafana-dashboard.json only (no image, chart package or checksums): what the
#   tests apply.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART="${ROOT}/charts/echelon"
# The names a user of install.yaml gets: those of a Helm release "echelon" in
# namespace "echelon-system", as in the docs.
RELEASE=echelon
NAMESPACE=echelon-system

helm="" dist="" version="" repository="" image_archive="" image_digest="" manifests_only=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --helm) helm="$2"; shift 2 ;;
    --dist) dist="$2"; shift 2 ;;
    --version) version="$2"; shift 2 ;;
    --repository) repository="$2"; shift 2 ;;
    --image-archive) image_archive="$2"; shift 2 ;;
    --image-digest) image_digest="$2"; shift 2 ;;
    --manifests-only) manifests_only=true; shift ;;
    *) echo "release: unknown argument $1" >&2; exit 2 ;;
  esac
done
for required in helm dist version; do
  if [[ -z "${!required}" ]]; then
    echo "release: --${required} is required" >&2
    exit 2
  fi
done
if [[ "${manifests_only}" == false && ( -z "${image_archive}" || -z "${image_digest}" ) ]]; then
  echo "release: --image-archive and --image-digest are required (or --manifests-only)" >&2
  exit 2
fi

mkdir -p "${dist}"
# The chart's own helm state stays out of the user's home.
helm_home="$(mktemp -d)"
trap 'rm -rf "${helm_home}"' EXIT
export HELM_CACHE_HOME="${helm_home}/cache" HELM_CONFIG_HOME="${helm_home}/config" HELM_DATA_HOME="${helm_home}/data"

# The image the manifests name: the chart's default unless told otherwise.
image_values=(--set "image.tag=${version}")
if [[ -n "${repository}" ]]; then
  image_values+=(--set "image.repository=${repository}")
fi

render() {
  "${helm}" template "${RELEASE}" "${CHART}" --namespace "${NAMESPACE}" "${image_values[@]}" "$@"
}

{
  cat <<EOF
# Echelon ${version}: everything \`kubectl apply -f install.yaml\` needs to run the
# operator without Helm, rendered from charts/echelon with its default values
# (release "${RELEASE}", namespace "${NAMESPACE}"). See docs/install.md.
apiVersion: v1
kind: Namespace
metadata:
  name: ${NAMESPACE}
  labels:
    app.kubernetes.io/part-of: echelon
EOF
  # Without the chart's hooks: applied by kubectl, the uninstall hook's Job
  # would run at once, beside an operator not yet started.
  render --no-hooks
} >"${dist}/install.yaml"

{
  cat <<EOF
# Echelon ${version}: the alerts of charts/echelon as a PrometheusRule (Prometheus
# Operator), for release "${RELEASE}" in namespace "${NAMESPACE}". Each alert links
# to its section of docs/runbooks.md.
EOF
  render --set prometheusRule.enabled=true --show-only templates/prometheusrule.yaml
} >"${dist}/prometheus-rules.yaml"

cp "${CHART}/dashboards/echelon.json" "${dist}/grafana-dashboard.json"

if [[ "${manifests_only}" == true ]]; then
  exit 0
fi

cp "${image_archive}" "${dist}/echelon-image-${version}.oci.tar"
echo "${image_digest}" >"${dist}/echelon-image-${version}.digest"
"${helm}" package "${CHART}" --destination "${dist}" --version "$(sed -n 's/^version: *//p' "${CHART}/Chart.yaml")" --app-version "${version}" >/dev/null

(
  cd "${dist}"
  rm -f SHA256SUMS
  sha256sum -- *.tgz *.oci.tar *.digest install.yaml prometheus-rules.yaml grafana-dashboard.json >SHA256SUMS
)
echo "release: wrote $(cd "${dist}" && ls | tr '\n' ' ')into ${dist#"${ROOT}"/}"
