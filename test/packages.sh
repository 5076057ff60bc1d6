#!/usr/bin/env bash
# Prints the Go packages of one test tier, one per line, for the Makefile:
#
#   unit         every package whose tests need no control plane
#   integration  every package whose tests, or the code under test, use the real
#                control plane (depend on test/controlplane), except e2e
#   e2e          the end-to-end suite under e2e/, but e2e/node
#   node         the node tier's suite, e2e/node (a real kubelet; `make test-node`)
#
# The tiers are derived from the import graph rather than listed, so that a new
# package lands in the right one without anyone remembering to add it, and a
# unit run on a machine without `make test-assets` never starts a control plane.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tier="${1:-}"
module="$(go list -m)"
controlplane="${module}/test/controlplane"
e2e="^${module}/e2e(/|$)"
node="^${module}/e2e/node(/|$)"

all="$(go list ./... | sort)"
# `go list -test` adds each package's test variants ("p [p.test]", "p_test
# [p.test]"), whose Deps include what the tests import; map them back to p.
users="$(
  {
    echo "${controlplane}"
    go list -test -f '{{.ImportPath}} {{join .Deps " "}}' ./... |
      awk -v cp="${controlplane}" '{
        for (i = 2; i <= NF; i++) if ($i == cp) { p = $1; sub(/(_test|\.test)$/, "", p); print p; next }
      }'
  } | sort -u
)"

case "${tier}" in
  unit) comm -23 <(echo "${all}") <(echo "${users}") | { grep -Ev "${e2e}" || true; } ;;
  integration) comm -12 <(echo "${all}") <(echo "${users}") | { grep -Ev "${e2e}" || true; } ;;
  e2e) grep -E "${e2e}" <<<"${all}" | { grep -Ev "${node}" || true; } ;;
  node) grep -E "${node}" <<<"${all}" || true ;;
  *)
    echo "usage: $0 unit|integration|e2e|node" >&2
    exit 2
    ;;
esac
