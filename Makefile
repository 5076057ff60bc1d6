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

.PHONY: all
all: build

##@ Build

.PHONY: build
build: ## Build the echelon binary into bin/echelon.
	go build -o $(BIN)/echelon .

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
	hack/sync-chart-crds.sh

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w $$(git ls-files '*.go')
