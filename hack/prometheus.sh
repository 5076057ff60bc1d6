#!/usr/bin/env bash
# Installs the Prometheus server that the metric-gated e2e tests query, from
# Debian's `prometheus` package, into bin/ without installing the package into
# the system (no root, no dpkg database, no service started):
#
#   bin/prometheus-<debian version>/{prometheus,promtool}
#
# The .deb is fetched with `apt-get download`, which checks it against the hash
# in the signed package index, then unpacked with dpkg-deb (or ar and tar). Only
# the two binaries are kept: the tests use the HTTP API, not the web UI.
# A directory that exists is complete (it is filled in a temporary directory and
# renamed into place), so a second run does nothing. e2e/framework finds the
# binary by reading PROMETHEUS_VERSION from this file.
#
# Usage: hack/prometheus.sh [--print-binary]
#   --print-binary  print the binary's path and exit without installing.
set -euo pipefail

# Debian 12 (bookworm, the release of the CI machines) serves one version,
# chosen here: 2.42.0+ds-5+deb12u1, its stable update of 2.42.0+ds-5+b6 (which
# the machine image's older package index still names; the script then fetches
# a current index, below). An exact Debian version, so that a rebuild in the
# archive changes the directory name rather than what an existing directory
# holds. If the archive moves on, this script says so: set the version to what
# `apt-cache policy prometheus` shows after `apt-get update`.
PROMETHEUS_VERSION="2.42.0+ds-5+deb12u1"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${ROOT}/bin/prometheus-${PROMETHEUS_VERSION}"
BINARY="${DIR}/prometheus"

if [[ "${1:-}" == "--print-binary" ]]; then
  echo "${BINARY}"
  exit 0
fi
if [[ -x "${BINARY}" ]]; then
  echo "${BINARY}"
  exit 0
fi

mkdir -p "${ROOT}/bin"
work="$(mktemp -d "${ROOT}/bin/.prometheus-XXXXXX")"
trap 'rm -rf "${work}"' EXIT

# apt options for every call. As root, apt would fetch as the _apt user, who
# cannot write into this private directory; the file is still verified against
# the index, so fetching as the caller loses nothing.
apt_opts=(-q -o APT::Sandbox::User="$(id -un)")

# download fetches the pinned .deb into ${work} with the apt options given.
download() {
  (cd "${work}" && apt-get "${apt_opts[@]}" "$@" download "prometheus=${PROMETHEUS_VERSION}") >&2
}

# indexed reports whether the package index (the system's, or the one the
# given apt options name) lists the pinned version. `apt-cache show` is no test:
# it exits 0 for a version it does not know.
indexed() {
  apt-cache "${apt_opts[@]}" "$@" madison prometheus 2>/dev/null |
    awk -F'|' -v v="${PROMETHEUS_VERSION}" '{ gsub(/ /, "", $2) } $2 == v { found = 1 } END { exit !found }'
}

# The system's package index is used when it knows the version. On a machine
# whose index is missing or stale, a private one is fetched into ${work}: that
# needs no root and leaves the system's apt state alone.
if indexed; then
  download
else
  echo "prometheus: the system's package index lacks prometheus=${PROMETHEUS_VERSION}; fetching a private index" >&2
  mkdir -p "${work}/lists/partial" "${work}/cache/archives/partial"
  private=(-o Dir::State::Lists="${work}/lists" -o Dir::Cache="${work}/cache" -o Debug::NoLocking=1)
  apt-get "${apt_opts[@]}" "${private[@]}" update >&2
  if ! indexed "${private[@]}"; then
    echo "prometheus: Debian no longer serves prometheus=${PROMETHEUS_VERSION};" \
      "set PROMETHEUS_VERSION in hack/prometheus.sh to a version 'apt-cache policy prometheus' lists" >&2
    exit 1
  fi
  download "${private[@]}"
fi

deb=("${work}"/prometheus_*.deb)
if [[ ! -f "${deb[0]}" ]]; then
  echo "prometheus: apt-get download left no .deb in ${work}" >&2
  exit 1
fi

mkdir "${work}/root"
if command -v dpkg-deb >/dev/null; then
  dpkg-deb -x "${deb[0]}" "${work}/root"
else
  # A .deb is an ar archive whose data member is a compressed tar.
  data="$(cd "${work}" && ar t "${deb[0]}" | grep '^data\.tar')"
  (cd "${work}" && ar x "${deb[0]}" "${data}")
  tar -xf "${work}/${data}" -C "${work}/root"
fi

mkdir "${work}/out"
cp "${work}/root/usr/bin/prometheus" "${work}/root/usr/bin/promtool" "${work}/out/"
# Refuse a binary that does not run here rather than let every test fail on it.
"${work}/out/prometheus" --version >&2
mv "${work}/out" "${DIR}"
echo "${BINARY}"
