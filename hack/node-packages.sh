#!/usr/bin/env bash
# Installs the Debian packages the node tier (test/nodetier) runs: containerd,
# runc, the CNI plugins, iptables (for kube-proxy) and conntrack. Only what is
# missing is installed, through apt-get, which needs root; no service is started
# (the tier starts its own containerd with its own configuration and stops it).
#
# It never fails `make test`: on a machine where it cannot install (not root, no
# apt-get, the archive unreachable) it prints one line saying why and exits 0,
# and the node tier then says in its own line that it does not run.
#
# Usage: hack/node-packages.sh [--check]
#   --check  exit 1 (printing what is missing) instead of installing.
set -euo pipefail

PACKAGES=(containerd runc containernetworking-plugins iptables conntrack)

missing=()
for p in "${PACKAGES[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "${p}" 2>/dev/null || true)" != "install ok installed" ]]; then
    missing+=("${p}")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
if [[ "${1:-}" == "--check" ]]; then
  echo "node-packages: missing ${missing[*]}"
  exit 1
fi
skip() {
  echo "node-packages: not installing ${missing[*]}: $1; the node tier will not run"
  exit 0
}
[[ "$(id -u)" == 0 ]] || skip "not root"
command -v apt-get >/dev/null || skip "no apt-get"

# Debian's containerd starts its service on install where an init system
# runs; a policy-rc.d that refuses every action keeps it from starting (the
# tier runs its own). Only written when the machine has none, and removed after.
policy=/usr/sbin/policy-rc.d
own_policy=""
if [[ ! -e "${policy}" ]]; then
  printf '#!/bin/sh\nexit 101\n' >"${policy}"
  chmod 755 "${policy}"
  own_policy=1
fi
cleanup() { if [[ -n "${own_policy}" ]]; then rm -f "${policy}"; fi; }
trap cleanup EXIT

start="$(date +%s)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/echelon-node-packages.log 2>&1; then
  # A stale package index names versions the archive no longer serves.
  if ! { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; } >>/tmp/echelon-node-packages.log 2>&1; then
    skip "apt-get failed (log in /tmp/echelon-node-packages.log)"
  fi
fi
echo "node-packages: installed ${missing[*]} in $(($(date +%s) - start))s"
