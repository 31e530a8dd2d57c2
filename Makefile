# Tend's build. `make help` lists the targets. Versions live in hack/versions.env;
# tools are built from pinned Go modules by hack/toolchain.sh into a cache
# outside the repository (~/.cache/tend), so nothing here downloads binaries.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

include hack/versions.env

TOOLCHAIN := hack/toolchain.sh
# Each of these builds its tool on first use and prints its path.
CONTROLLER_GEN = $$($(TOOLCHAIN) controller-gen)
GOLANGCI_LINT = $$($(TOOLCHAIN) golangci-lint)
KUBECTL = $$($(TOOLCHAIN) kubectl)

GO_TEST_FLAGS ?= -race -count=1
KUBECONFIG ?= $(HOME)/.kube/config
export KUBECONFIG

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate deepcopy code from the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./...

.PHONY: manifests
manifests: ## Generate CRDs and RBAC from the +kubebuilder markers.
	$(CONTROLLER_GEN) rbac:roleName=manager crd:generateEmbeddedObjectMeta=true paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	hack/crd-kustomization.sh

.PHONY: fmt
fmt: ## Format the Go code.
	$(GOLANGCI_LINT) fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: ## Run golangci-lint (.golangci.yml).
	$(GOLANGCI_LINT) run ./...

.PHONY: verify
verify: ## Fail if generated files, tool pins or go.mod are out of date.
	hack/verify.sh

##@ Test

.PHONY: test
test: verify test-unit lint ## Everything CI runs: verify, unit and envtest tests, lint.

.PHONY: test-unit
test-unit: toolchain-envtest ## Unit and envtest tests (a real kube-apiserver and etcd).
	KUBEBUILDER_ASSETS="$$($(TOOLCHAIN) --envtest)" go test $(GO_TEST_FLAGS) ./...

.PHONY: bench
bench: toolchain-envtest ## Run the benchmarks; they print figures and never fail on time.
	KUBEBUILDER_ASSETS="$$($(TOOLCHAIN) --envtest)" go test -run '^$$' -bench . -benchmem ./...

##@ Build

.PHONY: build
build: ## Build bin/tend.
	CGO_ENABLED=0 go build -trimpath -o bin/tend ./cmd/tend

.PHONY: toolchain
toolchain: ## Build every pinned tool that the cache lacks.
	$(TOOLCHAIN) --all

.PHONY: toolchain-envtest
toolchain-envtest:
	$(TOOLCHAIN) --envtest controller-gen golangci-lint >/dev/null

##@ Run

.PHONY: install
install: ## Install the CRDs into the cluster in $KUBECONFIG.
	$(KUBECTL) apply --server-side -k config/crd

.PHONY: run
run: ## Run the manager from source against the cluster in $KUBECONFIG.
	@$(KUBECTL) version >/dev/null 2>&1 || { \
		echo "make run: no cluster answers at KUBECONFIG=$(KUBECONFIG)." >&2; \
		echo "Point KUBECONFIG at a cluster you may change." >&2; exit 1; }
	$(MAKE) install
	go run ./cmd/tend manager --metrics-bind-address=127.0.0.1:8443 --health-probe-bind-address=127.0.0.1:8081
