#!/usr/bin/env bash
# Cross-builds kubectl-echelon and writes its release artifacts into a
# directory (`make release-plugin`: dist/):
#
#   kubectl-echelon_<version>_<os>_<arch>.tar.gz   the binary (and the licence
#                                                  notice, when there is one), for
#                                                  linux and darwin, amd64 and arm64
#   kubectl-echelon_<version>_SHA256SUMS           their checksums
#   echelon.yaml                                   the Krew manifest (hack/krew/echelon.yaml
#                                                  with the version and checksums)
#
# The binaries are static (CGO_ENABLED=0), stripped and built with -trimpath,
# so two builds of one commit are the same. Nothing here touches the network.
#
# Usage: hack/release-plugin.sh --dist DIR --version VERSION
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PLATFORMS=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)

dist="" version=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dist) dist="$2"; shift 2 ;;
    --version) version="$2"; shift 2 ;;
    *) echo "release-plugin.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "${dist}" && -n "${version}" ]] || { echo "usage: $0 --dist DIR --version VERSION" >&2; exit 2; }
version="${version#v}"

mkdir -p "${dist}"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
# The archives' entries carry the last commit's time, not the build's.
mtime="$(git -C "${ROOT}" log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)"

archives=()
platforms_yaml=""
for platform in "${PLATFORMS[@]}"; do
  os="${platform%/*}" arch="${platform#*/}"
  dir="${work}/${os}_${arch}"
  mkdir -p "${dir}"
  (cd "${ROOT}" && CGO_ENABLED=0 GOOS="${os}" GOARCH="${arch}" go build -trimpath \
    -ldflags "-s -w -X main.version=v${version}" -o "${dir}/kubectl-echelon" ./cmd/kubectl-echelon)
  [[ -f "${ROOT}/LICENSE" ]] && cp "${ROOT}/LICENSE" "${dir}/"
  archive="kubectl-echelon_${version}_${os}_${arch}.tar.gz"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="${mtime}" -C "${dir}" -cf - . | gzip -n >"${dist}/${archive}"
  archives+=("${archive}")
  sum="$(sha256sum "${dist}/${archive}" | cut -d' ' -f1)"
  platforms_yaml+="  - selector:
      matchLabels:
        os: ${os}
        arch: ${arch}
    uri: https://github.com/echelon-operator/echelon/releases/download/v${version}/${archive}
    sha256: ${sum}
    bin: kubectl-echelon
"
done

(cd "${dist}" && sha256sum -- "${archives[@]}" >"kubectl-echelon_${version}_SHA256SUMS")
VERSION="${version}" PLATFORMS="${platforms_yaml%$'\n'}" \
  awk '/^#/ && !body { next } { body = 1; gsub(/\$\{VERSION\}/, ENVIRON["VERSION"]); if ($0 == "${PLATFORMS}") print ENVIRON["PLATFORMS"]; else print }' \
  "${ROOT}/hack/krew/echelon.yaml" >"${dist}/echelon.yaml"
echo "kubectl-echelon v${version}: ${#archives[@]} archives, checksums and the Krew manifest in ${dist}"
