# Echelon build, generation and test entry points. Every tool is built from a
# pinned Go module under hack/tools into bin/, keyed by version.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

ROOT := $(abspath .)
BIN := $(ROOT)/bin
export GOFLAGS ?= -buildvcs=false

CONTROLLER_GEN_VERSION := v0.23.0
CRD_REF_DOCS_VERSION := v0.3.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
CRD_REF_DOCS := $(BIN)/crd-ref-docs-$(CRD_REF_DOCS_VERSION)
# golangci-lint with the Kube API Linter built in as a module plugin (the
# linter's own command; `golangci-lint custom` would clone golangci-lint's
# repository instead), both pinned in hack/tools/golangci-lint/go.mod. Read from
# go.mod as hack/test-assets.sh does, since make expands the binary's name on
# every run, `make test` included, which must not need the module cache.
lint_tool_version = $(shell awk '$$1 == "$(1)" && $$2 ~ /^v/ { print $$2; exit }' hack/tools/golangci-lint/go.mod)
GOLANGCI_LINT_VERSION = $(call lint_tool_version,github.com/golangci/golangci-lint/v2)
KUBE_API_LINTER_VERSION = $(call lint_tool_version,sigs.k8s.io/kube-api-linter)
GOLANGCI_LINT = $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)-kube-api-linter-$(KUBE_API_LINTER_VERSION)

.PHONY: all
all: build

##@ Build

.PHONY: build
build: ## Build the echelon binary into bin/echelon.
	go build -o $(BIN)/echelon .

# The kubectl plugin's version is the commit's `git describe` (a tag once
# releases are tagged, else the commit); `kubectl echelon version` compares it
# with the operator's.
PLUGIN_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: kubectl-echelon
kubectl-echelon: ## Build the kubectl plugin into bin/kubectl-echelon (put bin/ on PATH for `kubectl echelon`).
	go build -ldflags "-X main.version=$(PLUGIN_VERSION)" -o $(BIN)/kubectl-echelon ./cmd/kubectl-echelon

##@ Image and release

# The operator image, built without a container engine by hack/image (a pinned
# go-containerregistry): static, non-root, linux/amd64 and linux/arm64, from an
# empty base, reproducible. VERSION defaults to the chart's appVersion so the
# chart's default image and the built one agree; SOURCE_DATE_EPOCH to the last
# commit's time. IMAGE_PLATFORMS=linux/amd64 builds one architecture.
VERSION ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$$/\1/p' charts/echelon/Chart.yaml)
IMAGE_REPOSITORY ?= ghcr.io/echelon-operator/echelon
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_LAYOUT := $(BIN)/image
IMAGE_ARCHIVE := $(BIN)/echelon-image-$(VERSION).oci.tar
IMAGE_BUILDER := $(BIN)/echelon-image-builder

# The builder prints <repository>:<version>@<digest>; bin/image.ref keeps it
# for `make release`.
.PHONY: image
image: ## Build the multi-arch OCI image into bin/image (layout) and bin/echelon-image-<version>.oci.tar.
	@mkdir -p $(BIN)
	go -C hack/image build -o $(IMAGE_BUILDER) .
	$(IMAGE_BUILDER) --source=$(ROOT) --layout=$(IMAGE_LAYOUT) --archive=$(IMAGE_ARCHIVE) \
		--version=$(VERSION) --repository=$(IMAGE_REPOSITORY) --platforms=$(IMAGE_PLATFORMS) | tee $(BIN)/image.ref

DIST := $(ROOT)/dist

.PHONY: release-helm
release-helm:
	hack/test-assets.sh helm

.PHONY: release
release: image release-helm ## Write the release artifacts to dist/: image archive, Helm chart package, install.yaml, alerts, dashboard, SHA256SUMS.
	hack/release.sh --helm $(CHART_HELM) --dist $(DIST) --version $(VERSION) --repository $(IMAGE_REPOSITORY) \
		--image-archive $(IMAGE_ARCHIVE) --image-digest $$(sed 's/.*@//' $(BIN)/image.ref)

# The plugin's release: linux and darwin, amd64 and arm64, checksums and the
# Krew manifest, into dist/ beside `make release`'s artifacts. PLUGIN_RELEASE
# defaults to the chart's appVersion, as the image's version does.
PLUGIN_RELEASE ?= $(VERSION)

.PHONY: release-plugin
release-plugin: ## Cross-build kubectl-echelon for linux/darwin x amd64/arm64 into dist/ with SHA256 checksums and the Krew manifest.
	hack/release-plugin.sh --dist $(DIST) --version $(PLUGIN_RELEASE)

##@ Generation

$(CONTROLLER_GEN):
	cd hack/tools/controller-gen && go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(CRD_REF_DOCS):
	cd hack/tools/crd-ref-docs && go build -o $@ github.com/elastic/crd-ref-docs

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy functions.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs, RBAC and webhook manifests.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=echelon paths=./controllers/... paths=./webhooks/... paths=./internal/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) webhook paths=./webhooks/... output:webhook:artifacts:config=config/webhook
	hack/sync-chart-crds.sh

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w $$(git ls-files '*.go')

$(GOLANGCI_LINT):
	cd hack/tools/golangci-lint && go build -o $@ sigs.k8s.io/kube-api-linter/cmd/golangci-lint-kube-api-linter

# gofmt covers every module in the tree, including the pinned tools';
# golangci-lint (.golangci.yml: go vet's analyzers among others, and the Kube API
# Linter on api/) the operator's module and the image builder's.
.PHONY: lint
lint: $(GOLANGCI_LINT) ## Check formatting (gofmt), run golangci-lint and the Kube API Linter on api/ (.golangci.yml).
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GOLANGCI_LINT) run ./...
	cd hack/image && $(GOLANGCI_LINT) run --config=$(ROOT)/.golangci.yml ./...

# Everything generated from the code. verify regenerates it all and fails on any
# difference from what is committed, including new files nobody committed.
GENERATED := api config charts/echelon docs/reference

.PHONY: verify
verify: generate manifests api-docs lint ## Regenerate everything and fail on drift.
	@if ! git diff --quiet -- $(GENERATED) || [ -n "$$(git ls-files --others --exclude-standard -- $(GENERATED))" ]; then \
		echo "Generated files differ from the committed ones; run 'make generate manifests api-docs' and commit:"; \
		git status --short -- $(GENERATED); git diff --stat -- $(GENERATED); exit 1; \
	fi
	@echo "verify: generated files are current"

##@ Docs

API_DOCS := docs/reference/api.md

.PHONY: api-docs
api-docs: $(CRD_REF_DOCS) ## Generate the API reference docs/reference/api.md from the Go types in api/.
	@mkdir -p $(dir $(API_DOCS))
	$(CRD_REF_DOCS) --source-path=./api --config=hack/crd-ref-docs.yaml --renderer=markdown \
		--output-path=$(API_DOCS) --log-level=WARN

##@ Chart

CHART_DIR := charts/echelon
# The helm that `make test-assets` builds from hack/tools/helm; ECHELON_HELM
# overrides it (the chart tests in charts/ honour the same variable).
CHART_HELM = $(or $(ECHELON_HELM),$(firstword $(wildcard $(BIN)/helm-*/helm)),$(error no helm under bin/: run `make test-assets` or set ECHELON_HELM))

.PHONY: chart-lint
chart-lint: ## Lint the Helm chart strictly, with its defaults and with each ci/*-values.yaml.
	$(CHART_HELM) lint --strict $(CHART_DIR)
	for values in $(CHART_DIR)/ci/*-values.yaml; do \
		$(CHART_HELM) lint --strict $(CHART_DIR) --values "$$values"; \
	done

.PHONY: chart-test
chart-test: ## Test the Helm chart's rendering, schema and RBAC against the generated manifests.
	go test ./charts/...

##@ Test assets

# The binaries of the real test control plane (DESIGN.md, "The test control
# plane"): kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd,
# kwok and helm, each in bin/<tool>-<version>/ with versions from
# hack/tools/*/go.mod, and the node tier's kubelet and kube-proxy in
# bin/kubernetes-node-<version>/ (after the control plane, whose build cache
# they share: 708 s on a two-core machine loaded by other builds). The script skips what is built: a warm run takes well
# under a second, a cold one 10-20 minutes on two cores (most of it Kubernetes).
.PHONY: test-assets
test-assets: ## Build the test control plane binaries into bin/ (cached by version).
	hack/test-assets.sh

# The Prometheus server the metric-gated e2e specs query, and the promtool the
# chart's alert tests run: Debian's `prometheus` package, fetched and unpacked
# without root into bin/prometheus-<version>/ (the version is pinned in
# hack/prometheus.sh). Cold about 5 s; warm, nothing.
.PHONY: prometheus
prometheus: ## Install Prometheus (Debian's package, unpacked) into bin/ for the e2e tests.
	hack/prometheus.sh

##@ Test

GO_TEST := go test -count=1
# The tiers come from the import graph (test/packages.sh): integration packages
# are those whose tests use test/controlplane, so a new package needs no listing.
UNIT_PACKAGES = $(shell test/packages.sh unit)
INTEGRATION_PACKAGES = $(shell test/packages.sh integration)
E2E_PACKAGES = $(shell test/packages.sh e2e)
NODE_PACKAGES = $(shell test/packages.sh node)
# go test with no package tests the current directory; say so instead.
go_test = $(if $(2),$(GO_TEST) -timeout $(1) $(2),@echo "no packages to test")

.PHONY: test
test: test-assets test-unit test-integration test-e2e test-node ## Build the test assets, then run every test.

# 25m, not 15m: test/image builds the operator's image for every platform,
# from an empty build cache on a fresh clone. Beside two other test runs on two
# cores that took over 15 minutes once (the package's own time).
.PHONY: test-unit
test-unit: ## Run the tests that need no control plane.
	$(call go_test,25m,$(UNIT_PACKAGES))

.PHONY: test-integration
test-integration: test-assets prometheus ## Run the tests against the real control plane (the chart's alert tests run promtool).
	$(call go_test,20m,$(INTEGRATION_PACKAGES))

# The e2e specs each have their own namespace and operator, so Ginkgo's parallel
# processes share one control plane, started by process 1. Most of a spec is
# waiting for pods and timers, so E2E_PROCS processes fit two cores: measured
# there, 4 take the suite from 153s (`go test ./e2e/`, one spec at a time) to 69s.
# The Ginkgo CLI is built at the version go.mod pins for the library.
E2E_PROCS ?= 4
GINKGO_VERSION = $(shell go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)
GINKGO = $(BIN)/ginkgo-$(GINKGO_VERSION)/ginkgo

.PHONY: test-e2e
test-e2e: test-assets prometheus ## Run the end-to-end suite: the operator as its own least-privileged user.
	go build -o $(GINKGO) github.com/onsi/ginkgo/v2/ginkgo
	$(if $(E2E_PACKAGES),$(GINKGO) -p --procs=$(E2E_PROCS) --timeout=30m $(subst $(shell go list -m)/,./,$(E2E_PACKAGES)),@echo "no packages to test")

# The node tier (docs/node-tier.md): the chart's operator, in the image `make
# image` builds (for this machine's architecture only: that is all the node
# runs), on a real kubelet and containerd in a network namespace of its own.
# hack/node-packages.sh installs the Debian packages it needs when missing
# (as root; else it says why and the tier does not run). Where the tier cannot
# run, its test prints one line saying why and passes, so `make test` goes on.
# -v, so that that line and the tier's figures are printed.
NODE_IMAGE_PLATFORM ?= linux/$(shell go env GOARCH)

.PHONY: test-node
test-node: test-assets ## Run the node tier: the Helm chart's operator on a real kubelet (root; installs Debian packages when missing).
	hack/node-packages.sh
	$(MAKE) image IMAGE_PLATFORMS=$(NODE_IMAGE_PLATFORM)
	$(if $(NODE_PACKAGES),$(GO_TEST) -v -timeout 20m $(NODE_PACKAGES),@echo "no packages to test")

##@ Demo

# The demo and the benchmark run on the same local control plane as the tests,
# so they need its binaries; warm, test-assets takes well under a second.
# DEMO_FLAGS passes flags to test/demo, e.g. DEMO_FLAGS=--exit-when-complete.
DEMO_FLAGS ?=

# Built, then run, rather than `go run`, which exits 1 when Ctrl-C ends the demo.
.PHONY: demo
demo: test-assets kubectl-echelon ## Roll out a three-zone RolloutGroup on a local control plane, then keep it running until Ctrl-C.
	go build -o $(BIN)/echelon-demo ./test/demo
	$(BIN)/echelon-demo $(DEMO_FLAGS)

##@ Bench

# BENCH_FLAGS passes flags to test/performance, e.g. BENCH_FLAGS='--json=bench.json'.
BENCH_FLAGS ?=

.PHONY: bench
bench: test-assets prometheus ## Time a 3 x 30-pod rollout against its floor (one operator; two with a SIGTERM or SIGKILL handover; among 100 groups of 150 pods, 15,000 pods, with the start-up to a warm cache, a heap profile, the idle CPU and the cache transforms' saving) with API requests, CPU and memory, ScalingPolicy followers tracking a leader, the no-downscale webhook, the eviction webhook through the API server beside it, a kubectl drain of 90 pods in three zones against its floor, one node in each of two zones drained at once against the same drained one after the other with PodDisruptionBudgets, and analysis gates against Prometheus. BENCH_FLAGS=--help lists the flags.
	go build -o $(BIN)/echelon-bench ./test/performance
	$(BIN)/echelon-bench $(BENCH_FLAGS)

##@ Soak

# SOAK_FLAGS passes flags to test/soak/cmd/echelon-soak, e.g.
# SOAK_FLAGS='--rollouts=200 --seed=42'. The default, 24 rollouts on 4 groups,
# takes a few minutes; docs/operations.md reads its table.
SOAK_FLAGS ?=

.PHONY: soak
soak: test-assets ## Roll out randomized scripts (flips, reverts, crash loops, scale changes, failing gates, handovers, an API server restart, throttling) on several groups at once and print the table. SOAK_FLAGS=--help lists the flags.
	go build -o $(BIN)/echelon-soak ./test/soak/cmd/echelon-soak
	$(BIN)/echelon-soak $(SOAK_FLAGS)
