#!/usr/bin/env bash
# Builds the binaries of the test control plane (see DESIGN.md, "The test control
# plane") from the pinned tool modules under hack/tools, into one directory per
# component and version:
#
#   bin/kubernetes-<version>/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl}
#   bin/kubernetes-node-<version>/{kubelet,kube-proxy}  (the node tier, test/nodetier)
#   bin/etcd-<version>/etcd
#   bin/kwok-<version>/kwok
#   bin/helm-<version>/helm
#
# Versions are read from the go.mod files under hack/tools, which stay the single
# source of truth; test/controlplane finds the binaries by the same rule. A
# directory that exists is complete (each is built in a temporary directory and
# renamed into place), so a second run builds nothing.
#
# Usage: hack/test-assets.sh [--print-dirs] [COMPONENT...]
#   COMPONENT     kubernetes, node, etcd, kwok or helm; all of them when none is
#                 named (a job that only lints the chart needs only helm). node is
#                 the kubelet and kube-proxy of the same Kubernetes version.
#   --print-dirs  print the directory of each component and exit without building.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROOT}/bin"
TOOLS="${ROOT}/hack/tools"

# module_version TOOL MODULE prints the version of MODULE required by
# hack/tools/TOOL/go.mod. Reading go.mod directly (instead of `go list -m`) keeps a
# warm run instant and needs neither the network nor the module cache.
module_version() {
  local gomod="${TOOLS}/$1/go.mod" module="$2" version
  version="$(awk -v m="${module}" '
    $1 == "require" && $2 == m { print $3; exit }
    $1 == m && $2 ~ /^v/ { print $2; exit }
  ' "${gomod}")"
  if [[ -z "${version}" ]]; then
    echo "test-assets: ${gomod} does not require ${module}" >&2
    exit 1
  fi
  echo "${version}"
}

K8S_VERSION="$(module_version kubernetes k8s.io/kubernetes)"
ETCD_VERSION="$(module_version etcd go.etcd.io/etcd/server/v3)"
KWOK_VERSION="$(module_version kwok sigs.k8s.io/kwok)"
HELM_VERSION="$(module_version helm helm.sh/helm/v4)"

K8S_DIR="${BIN}/kubernetes-${K8S_VERSION}"
NODE_DIR="${BIN}/kubernetes-node-${K8S_VERSION}"
ETCD_DIR="${BIN}/etcd-${ETCD_VERSION}"
KWOK_DIR="${BIN}/kwok-${KWOK_VERSION}"
HELM_DIR="${BIN}/helm-${HELM_VERSION}"

if [[ "${1:-}" == "--print-dirs" ]]; then
  printf '%s\n' "${K8S_DIR}" "${NODE_DIR}" "${ETCD_DIR}" "${KWOK_DIR}" "${HELM_DIR}"
  exit 0
fi

components=("$@")
if [[ ${#components[@]} -eq 0 ]]; then
  components=(etcd kwok helm kubernetes node)
fi
for c in "${components[@]}"; do
  case "${c}" in
    kubernetes | node | etcd | kwok | helm) ;;
    *)
      echo "test-assets: unknown component ${c} (want kubernetes, node, etcd, kwok or helm)" >&2
      exit 2
      ;;
  esac
done
wanted() { [[ " ${components[*]} " == *" $1 "* ]]; }

# -trimpath and -s -w keep the binaries small and independent of this checkout's
# path. CGO is off: none of these needs it, and it keeps a clean machine free of a
# C toolchain requirement.
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
COMMON_LDFLAGS="-s -w"

# The directory being built, removed if the script stops before renaming it.
building=""
trap 'if [[ -n "${building}" ]]; then rm -rf "${building}"; fi' EXIT

# build NAME DIR TOOL LDFLAGS OUTPUT PACKAGE... builds PACKAGEs inside
# hack/tools/TOOL into DIR unless DIR already exists. OUTPUT names the binary when
# a single package is built; empty means "name each after its package".
build() {
  local name="$1" dir="$2" tool="$3" ldflags="$4" output="$5"
  shift 5
  if [[ -d "${dir}" ]]; then
    echo "test-assets: ${name} up to date in ${dir#"${ROOT}"/}"
    return 0
  fi
  local start
  start="$(date +%s)"
  mkdir -p "${BIN}"
  # Build next to the final directory so the rename below is atomic: an
  # interrupted build never leaves a directory that looks complete.
  building="$(mktemp -d "${dir}.tmp.XXXXXX")"
  chmod 755 "${building}" # mktemp makes it private
  echo "test-assets: building ${name} into ${dir#"${ROOT}"/} ..."
  (cd "${TOOLS}/${tool}" && go build -trimpath -ldflags="${ldflags}" -o "${building}/${output}" "$@")
  mv "${building}" "${dir}"
  building=""
  echo "test-assets: built ${name} in $(($(date +%s) - start))s"
}

# The Kubernetes build scripts stamp the version into both version packages; the
# API server reports it in /version, which Helm (kubeVersion constraints) and kwok
# read, and kubectl prints it.
k8s_ldflags="${COMMON_LDFLAGS}"
k8s_minor="$(cut -d. -f2 <<<"${K8S_VERSION}")"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X ${pkg}.gitVersion=${K8S_VERSION}"
  k8s_ldflags+=" -X ${pkg}.gitMajor=$(cut -d. -f1 <<<"${K8S_VERSION#v}")"
  k8s_ldflags+=" -X ${pkg}.gitMinor=${k8s_minor}"
  k8s_ldflags+=" -X ${pkg}.gitTreeState=clean"
done

total_start="$(date +%s)"
# Sequential on purpose: the Go toolchain already uses every core for one build,
# and the four builds share most of the Kubernetes dependency graph through the
# build cache.
if wanted etcd; then
  # `go build go.etcd.io/etcd/server/v3` alone would name the binary `v3`.
  build "etcd ${ETCD_VERSION}" "${ETCD_DIR}" etcd "${COMMON_LDFLAGS}" etcd \
    go.etcd.io/etcd/server/v3
fi
if wanted kwok; then
  build "kwok ${KWOK_VERSION}" "${KWOK_DIR}" kwok \
    "${COMMON_LDFLAGS} -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" kwok \
    sigs.k8s.io/kwok/cmd/kwok
fi
if wanted helm; then
  build "helm ${HELM_VERSION}" "${HELM_DIR}" helm \
    "${COMMON_LDFLAGS} -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION} -X helm.sh/helm/v4/internal/version.gitTreeState=clean" helm \
    helm.sh/helm/v4/cmd/helm
fi
if wanted kubernetes; then
  build "kubernetes ${K8S_VERSION}" "${K8S_DIR}" kubernetes "${k8s_ldflags}" "" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl
fi
# After the control plane, whose build cache it shares: warm from it, the
# kubelet and kube-proxy take about a minute instead of four.
if wanted node; then
  build "kubelet and kube-proxy ${K8S_VERSION}" "${NODE_DIR}" kubernetes "${k8s_ldflags}" "" \
    k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy
fi

echo "test-assets: done in $(($(date +%s) - total_start))s"
