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
# The e2e tests run against the local cluster; the bound is for a cold
# machine, where they build the node's images first. They mostly wait (for
# pods, members, timers): with two at a time the two cores were 60% idle,
# so three run at once.
E2E_TEST_FLAGS ?= -count=1 -parallel 3 -timeout 60m
# The tests that run on the local cluster (e2e, chaos, Helm) and the chart's
# are built as the tend image's binaries are (hack/cluster/images.sh:
# CGO_ENABLED=0, -trimpath): with the same settings the Go build cache
# serves one build's packages to the others, where a cold run otherwise
# compiled every dependency twice (1,135 packages, about 5 CPU-minutes).
CLUSTER_GO_TEST := CGO_ENABLED=0 go test -trimpath
# The local cluster (hack/cluster, docs/cluster.md) is the default cluster.
LOCAL_KUBECONFIG := /var/lib/tend-cluster/kubeconfig
KUBECONFIG ?= $(LOCAL_KUBECONFIG)
export KUBECONFIG
# The manager's image for make deploy.
IMG ?= ghcr.io/tend-dev/tend:dev

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
manifests: ## Generate CRDs and RBAC from the +kubebuilder markers, the PrometheusRule from the alerts, and the chart's templates and dist/install.yaml from config/.
	$(CONTROLLER_GEN) rbac:roleName=manager crd:generateEmbeddedObjectMeta=true paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	hack/crd-kustomization.sh
	hack/prometheus-rule.sh
	hack/chart.sh

.PHONY: fmt
fmt: ## Format the Go code.
	$(GOLANGCI_LINT) fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet -tags e2e ./...

# lint and its build run at the lowest CPU priority: make test runs them beside the chaos suite.
.PHONY: lint
lint: ## Run golangci-lint (.golangci.yml), the e2e and chart tests and hack/cluster's Go included.
	linter="$$(nice -n 19 $(TOOLCHAIN) golangci-lint)" && nice -n 19 "$$linter" run --build-tags e2e,chart ./... && \
		cd hack/cluster && nice -n 19 "$$linter" run ./...
	$(STAGE_DONE)

.PHONY: verify
verify: verify-cluster ## Fail if generated files, tool pins or go.mod are out of date.
	hack/verify.sh

.PHONY: verify-cluster
verify-cluster:
	cd hack/cluster && go mod tidy -diff >/dev/null 2>&1 || \
		{ echo "verify: hack/cluster/go.mod or go.sum is not tidy; run go mod tidy there" >&2; exit 1; }
	$(KUBECTL) kustomize config/local >/dev/null
	$(KUBECTL) kustomize config/prometheus >/dev/null
	$(KUBECTL) kustomize config/grafana >/dev/null

##@ Test

# make test runs the stages below in this order. The first builds the tools
# that the cluster and the tests need, two tool builds side by side (nothing
# when the cache has them). Where a stage mostly waits, other work runs beside
# it: the unit and envtest tests and the build of Helm and krew beside the e2e
# tests (which wait for pods, members and timers with the two cores half
# idle), and lint beside the chaos suite (which waits out the manager's
# Lease). The build and lint run at the lowest CPU priority (nice), so that
# they take the cores only when the tests beside them leave them idle. Each
# stage's output is printed whole when it ends (-O), with its time.
TEST_STAGES := test-toolchain verify test-rules cluster-up "test-e2e test-unit test-late-tools" test-chart test-helm "test-chaos-short lint"
# The tools that the stages before the e2e tests use, the longest builds
# first (hack/toolchain.sh --parallel). Helm and krew are built beside the
# e2e tests, golangci-lint by the lint stage.
TEST_TOOLS := kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl \
	coredns containerd containerd-shim-runc-v2 ctr etcd etcdctl etcdutl \
	etcd-upgrade-from/etcd etcd-upgrade-from/etcdctl etcd-upgrade-from/etcdutl \
	local-path-provisioner controller-gen
LATE_TEST_TOOLS := helm krew

.PHONY: test-toolchain
test-toolchain: ## Build the tools that make test needs before the e2e tests into the cache (~/.cache/tend), two builds at a time.
	$(TOOLCHAIN) --parallel $(TEST_TOOLS)

.PHONY: test-late-tools
test-late-tools:
	nice -n 19 $(TOOLCHAIN) --parallel $(LATE_TEST_TOOLS)
	$(STAGE_DONE)

.PHONY: test
test: ## Everything CI runs: verify, alert rules, the chart, unit, envtest, e2e, Helm install and short chaos tests, lint.
	@start=$$(date +%s); for stage in $(TEST_STAGES); do \
		t=$$(date +%s); \
		case "$$stage" in *" "*) set -- $$stage; par="-j$$# -O";; *) par="";; esac; \
		STAGE_START=$$t $(MAKE) --no-print-directory $$par $$stage || { echo "make test: $$stage failed after $$(( $$(date +%s) - t ))s" >&2; exit 1; }; \
		echo "make test: $$stage took $$(( $$(date +%s) - t ))s"; \
	done; echo "make test: passed in $$(( $$(date +%s) - start ))s"

# The last line of each target that make test runs beside others: when it
# finished within its stage (their output is printed target by target).
STAGE_DONE = @[ -z "$${STAGE_START:-}" ] || echo "make test: $@ finished $$(( $$(date +%s) - STAGE_START ))s into its stage"

.PHONY: test-rules
test-rules: ## Check the alerts (config/prometheus) with promtool, from Debian's pinned prometheus package.
	promtool="$$(hack/promtool.sh)" && "$$promtool" check rules config/prometheus/rules.yaml && \
		"$$promtool" test rules config/prometheus/rules_test.yaml

.PHONY: test-chart
test-chart: ## Lint and render the Helm chart over each values file in dist/chart/ci (pinned Helm), check it renders config/default; install the plugin with krew from its generated manifest.
	HELM="$$($(TOOLCHAIN) helm)" KUBECTL="$$($(TOOLCHAIN) kubectl)" $(CLUSTER_GO_TEST) -tags chart -count=1 ./test/chart/
	hack/krew-check.sh

.PHONY: test-unit
test-unit: toolchain-envtest ## Unit and envtest tests (a real kube-apiserver and etcd).
	KUBEBUILDER_ASSETS="$$($(TOOLCHAIN) --envtest)" go test $(GO_TEST_FLAGS) ./...
	cd hack/cluster && go test -count=1 ./...
	$(STAGE_DONE)

.PHONY: test-e2e
test-e2e: ## End-to-end tests on the local cluster: brings it up, deploys Tend from its image.
	hack/cluster/up.sh
	rm -f $(E2E_TIMES); rc=0; $(CLUSTER_GO_TEST) -tags e2e $(E2E_TEST_FLAGS) ./test/e2e/... -args -e2e.times=$(E2E_TIMES) || rc=$$?; \
		cat $(E2E_TIMES) 2>/dev/null || true; exit $$rc
	$(STAGE_DONE)

.PHONY: test-helm
test-helm: ## Install Tend with the chart (helm install --wait) over the local cluster's Tend and run a sample.
	hack/cluster/up.sh
	HELM="$$($(TOOLCHAIN) helm)" $(CLUSTER_GO_TEST) -tags e2e $(E2E_TEST_FLAGS) ./test/helm/...

# Each e2e test's running time, longest first, printed after the tests (the
# parallel tests start about in the order they are declared).
E2E_TIMES := $(CURDIR)/.cache/e2e/times.txt

# The chaos suite prints its table when it ends; go test shows a passing
# package's output only with -v, so the table goes to a file and is printed.
CHAOS_TABLE := $(CURDIR)/.cache/chaos/table.txt
# The etcd scenarios run three at a time (test/chaos/doc.go); the others one after another.
CHAOS_PARALLEL := 3

.PHONY: chaos
chaos: ## The chaos suite on the local cluster (docs/reliability.md): 50 manager kills during PodSet scaling, manager kills during etcd scaling, member replacement, rolls, backups, restores and quorum-loss recoveries, etcd member kills, leader takeover, frozen leaders, fuzzed specs.
	hack/cluster/up.sh
	rm -f $(CHAOS_TABLE); rc=0; $(CLUSTER_GO_TEST) -tags e2e -count=1 -parallel $(CHAOS_PARALLEL) -timeout 150m ./test/chaos/... -args -chaos.kills=50 -chaos.table=$(CHAOS_TABLE) || rc=$$?; \
		cat $(CHAOS_TABLE) 2>/dev/null || true; exit $$rc

.PHONY: test-chaos-short
test-chaos-short: ## The chaos suite's reduced form for CI: a few kills of each kind and a small fuzz.
	hack/cluster/up.sh
	rm -f $(CHAOS_TABLE); rc=0; $(CLUSTER_GO_TEST) -tags e2e -count=1 -parallel $(CHAOS_PARALLEL) -timeout 45m ./test/chaos/... -args -chaos.short -chaos.table=$(CHAOS_TABLE) || rc=$$?; \
		cat $(CHAOS_TABLE) 2>/dev/null || true; exit $$rc
	$(STAGE_DONE)

.PHONY: bench
bench: toolchain-envtest ## Run the benchmarks; they print figures and never fail on time.
	KUBEBUILDER_ASSETS="$$($(TOOLCHAIN) --envtest)" go test -p 1 -timeout 30m -run '^$$' -bench '^Benchmark[^F]' -benchmem ./...
	# F2 (100,000 pods of 1000 PodSets, three samples) takes an hour or more on 2 cores.
	KUBEBUILDER_ASSETS="$$($(TOOLCHAIN) --envtest)" go test -timeout 180m -run '^$$' -bench F2 -benchtime 1x ./test/bench/podset
	# B8 to B13's restore and F1 run on the local cluster, which they bring up, and time minutes-long steps themselves;
	# B8 takes five samples per variant, B9 one, B10 to B13 as many as their -bN.samples say, F1 its -f1.windows.
	go test -tags e2e -timeout 60m -run '^$$' -bench B8 -benchtime 5x ./test/bench/etcd/...
	go test -tags e2e -timeout 180m -run '^$$' -bench 'B9|B10|B11|B12|B13|F1' -benchtime 1x ./test/bench/etcd/...

##@ Build

.PHONY: build
build: ## Build bin/tend and the kubectl plugin, bin/kubectl-tend.
	CGO_ENABLED=0 go build -trimpath -o bin/tend ./cmd/tend
	CGO_ENABLED=0 go build -trimpath -o bin/kubectl-tend ./cmd/kubectl-tend

.PHONY: plugin-dist
plugin-dist: ## Build kubectl-tend's release archives and krew manifest into dist/plugin: make plugin-dist VERSION=v0.1.0
	hack/plugin-dist.sh $(VERSION)

.PHONY: toolchain
toolchain: ## Build every pinned tool that the cache lacks, two builds at a time.
	$(TOOLCHAIN) --all

.PHONY: toolchain-envtest
toolchain-envtest:
	$(TOOLCHAIN) --envtest >/dev/null

##@ Run

.PHONY: run
run: ## Start the local cluster if needed, deploy Tend in it from its image, apply the samples.
	hack/cluster/up.sh
	hack/cluster/deploy.sh --local
	$(KUBECTL) --kubeconfig $(LOCAL_KUBECONFIG) apply --server-side -k config/samples
	@echo
	@echo "Tend runs in the namespace tend-system; the samples are in the namespace default. Watch them:"
	@echo "  export KUBECONFIG=$(LOCAL_KUBECONFIG)"
	@echo "  alias kubectl=$$($(TOOLCHAIN) kubectl)"
	@echo "  kubectl get -k config/samples               # the samples and their status"
	@echo "  kubectl get events -w                        # what the controllers do"
	@echo "  kubectl -n tend-system logs -f deployment/tend-manager"

.PHONY: run-local
run-local: ## Run the manager from source against the local cluster, in place of its Deployment.
	hack/cluster/up.sh
	$(KUBECTL) --kubeconfig $(LOCAL_KUBECONFIG) apply --server-side -k config/crd
	$(KUBECTL) --kubeconfig $(LOCAL_KUBECONFIG) -n tend-system scale deployment/tend-manager --replicas=0 2>/dev/null || true
	AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test KUBECONFIG=$(LOCAL_KUBECONFIG) go run ./cmd/tend manager \
		--sqs-endpoint="$$(hack/cluster/settings.sh | sed -n 's/^MOTO_URL=//p')" --sqs-region=us-east-1 \
		--metrics-bind-address=127.0.0.1:8443 --health-probe-bind-address=127.0.0.1:8081

.PHONY: install
install: ## Install the CRDs into the cluster in $KUBECONFIG.
	$(KUBECTL) apply --server-side -k config/crd

.PHONY: deploy
deploy: ## Deploy Tend (kubectl apply -k config/default) with IMG to the cluster in $KUBECONFIG.
	hack/cluster/deploy.sh $(IMG)

##@ Local cluster (docs/cluster.md)

.PHONY: cluster-up
cluster-up: ## Start the local one-node cluster, or repair it; prints how to use it.
	hack/cluster/up.sh

.PHONY: cluster-down
cluster-down: ## Stop the local cluster; its state stays for the next cluster-up.
	hack/cluster/down.sh

.PHONY: cluster-status
cluster-status: ## Say which of the local cluster's processes run, with their logs.
	@hack/cluster/status.sh

.PHONY: cluster-wipe
cluster-wipe: ## Delete the local cluster and all of its state.
	hack/cluster/wipe.sh

.PHONY: cluster-images
cluster-images: ## Build every image and import it into the local cluster.
	hack/cluster/images.sh load all
