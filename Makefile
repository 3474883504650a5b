# Flotilla — the two commands are `make up` and `make test`.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

ROOT    := $(CURDIR)
# FLOTILLA_BIN moves bin/ for every target, as for hack/build-tools.sh and hack/local-up.sh.
BIN     := $(or $(FLOTILLA_BIN),$(ROOT)/bin)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/flotilla-io/flotilla/pkg/version.Version=$(VERSION) -X github.com/flotilla-io/flotilla/pkg/version.GitCommit=$(COMMIT)
# The image `make image` builds and writes into kustomize/image (every
# kustomization deploys it); PLATFORMS=linux/amd64,linux/arm64 makes an index.
IMAGE     ?= ghcr.io/flotilla-io/flotilla:$(VERSION)
# The kustomize Component `make image` points at the image; empty leaves it
# alone (an overlay names the image instead: hack/realnode-install.sh).
IMAGE_COMPONENT ?= kustomize/image/kustomization.yaml
PLATFORMS ?=

# `make up` knobs (see README): number of members, fake nodes per member,
# agent processes per member, FAST=1 for demo-speed timeouts.
MEMBERS ?= 3
NODES   ?= 3
AGENTS_PER_MEMBER ?= 2
FAST    ?= 0
export MEMBERS NODES AGENTS_PER_MEMBER FAST

# Test knobs.
GO_TEST_FLAGS ?= -count=1
E2E_PROVIDER  ?= local
export E2E_PROVIDER

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN{FS=":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: tools
tools: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, kwokctl, CoreDNS, ExternalDNS (crd source, CoreDNS provider), the code generators, staticcheck, promtool and prometheus into bin/ (cached).
	hack/build-tools.sh

.PHONY: build
build: ## Build the hub and agent binaries and the kubectl plugin (kubectl flotilla) into bin/.
	CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$(LDFLAGS)" -o $(BIN)/hub ./hub
	CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$(LDFLAGS)" -o $(BIN)/agent ./agent
	CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-flotilla ./kubectl-flotilla

# hack/image (go-containerregistry, no container runtime): bin/image is an
# OCI layout, bin/image/flotilla.tar a docker-archive; the digest is printed.
.PHONY: image
image: ## Build the image IMAGE (/hub, /agent; non-root, static, reproducible) into bin/image/ (OCI layout, flotilla.tar) and point kustomize/image at it.
	go run ./hack/image --image $(IMAGE) --version $(VERSION) --commit $(COMMIT) $(if $(PLATFORMS),--platforms $(PLATFORMS)) \
		--oci-layout $(BIN)/image --tarball $(BIN)/image/flotilla.tar $(if $(IMAGE_COMPONENT),--kustomize $(IMAGE_COMPONENT))

# The same image from the top-level Dockerfile (bin/hub and bin/agent of
# `make build`, the rootfs files hack/image embeds), with make image's
# version, commit and SOURCE_DATE_EPOCH (default: the HEAD commit's time).
# CONTAINER_BUILD: `docker build` (BuildKit), `podman build`, or
# `buildah bud --identity-label=false --timestamp $$SOURCE_DATE_EPOCH`.
CONTAINER_BUILD   ?= docker build
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct HEAD 2>/dev/null || echo 0)
.PHONY: image-dockerfile
image-dockerfile: build ## Build IMAGE from the Dockerfile with CONTAINER_BUILD (docker build): the same files and config as make image (hack/image TestDockerfile).
	$(if $(filter $(ROOT)/bin,$(BIN)),,$(error the Dockerfile copies bin/hub and bin/agent: unset FLOTILLA_BIN))
	$(CONTAINER_BUILD) -f Dockerfile -t $(IMAGE) --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) \
		--build-arg SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) --build-arg CREATED=$$(date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ) .

.PHONY: monitoring
monitoring: ## Render the monitoring mixin (monitoring/mixin) into monitoring/prometheus-alerts.yaml, prometheusrule.yaml and dashboards/.
	go run ./hack/mixin

.PHONY: generate
generate: ## Regenerate deepcopy, clientset, listers, informers and CRD YAML.
	hack/build-tools.sh controller-gen deepcopy-gen client-gen lister-gen informer-gen
	hack/update-codegen.sh

.PHONY: verify
verify: lint ## Fail if generated code is stale, code is not gofmt'ed, or go vet or staticcheck complains.
	hack/build-tools.sh controller-gen deepcopy-gen client-gen lister-gen informer-gen
	hack/verify-codegen.sh
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/tools/')); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

.PHONY: lint
lint: ## go vet and staticcheck (staticcheck.conf; built from hack/tools/lint into bin/).
	hack/build-tools.sh staticcheck
	go vet ./...
	$(BIN)/staticcheck $$(go list ./... | grep -v /pkg/generated/)

# The tools hack/local-up.sh runs (it lists them: with MONITORING=1 also
# Prometheus); `make up` builds only these, not the code generators or the
# linter that `make tools` (and so `make test`) builds too.
MONITORING ?= 0
export MONITORING
UP_TOOLS = $(shell MONITORING=$(MONITORING) hack/local-up.sh --tools)

.PHONY: up-tools
up-tools: ## Build only the tools `make up` runs into bin/ (cached).
	hack/build-tools.sh $(UP_TOOLS)

.PHONY: up
up: up-tools build ## Bring up a hub and $(MEMBERS) kwok member clusters on this machine and run Flotilla on them (MONITORING=1: and Prometheus).
	hack/local-up.sh

.PHONY: down
down: ## Stop and delete everything `make up` started.
	hack/local-down.sh

.PHONY: test
test: tools build verify test-fuzz test-integration test-e2e-both ## Build what is needed and run every test (what CI runs; test-integration runs the unit tests too).

# The two end-to-end suites side by side: the kwok suite mostly waits on
# timers, the real-node one on kubelets and containerd, and they share no
# name, port or directory (measured: 510 s + 154 s one after the other, 523 s
# side by side). --output-sync prints each suite's output whole when it ends.
.PHONY: test-e2e-both
test-e2e-both: tools build ## test-e2e and test-e2e-realnode side by side (what make test runs after test-integration).
	$(MAKE) -j2 --output-sync=target test-e2e test-e2e-realnode

# Every Go native fuzz target (hack/fuzz.sh --list) for FUZZTIME each: a
# short run in `make test` (their checked-in corpora also run in every go
# test), a long one in `make fuzz`. A crasher is written to the package's
# testdata/fuzz/ and fails the run.
.PHONY: test-fuzz
test-fuzz: ## Run each fuzz target for FUZZTIME (5s) on top of its seed corpus (what make test runs).
	FUZZTIME=$(or $(FUZZTIME),5s) hack/test-recap.sh .local/test-fuzz.log hack/fuzz.sh

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (10m); FUZZ_MATCH=regexp picks targets.
	FUZZTIME=$(or $(FUZZTIME),10m) hack/fuzz.sh

.PHONY: test-unit
test-unit: ## Unit tests (no apiserver; promtool for the alert rule tests in monitoring/).
	hack/build-tools.sh promtool
	go test $(GO_TEST_FLAGS) -short ./...

# Four packages at a time, and within a package up to four t.Parallel tests
# at once: much of an integration test's time is waiting on real timers,
# token lifetimes and control planes starting, not CPU (on 2 cores, -p 4
# took the suite from 430 s to 273 s). client-go's cache mutation detector
# panics when a controller changes an object its informer cached, which would
# corrupt what other objects share (the hub's cache shares equal maps and
# placements, pkg/hub/cachetransform), as Kubernetes' own integration tests do.
# -timeout 30m: hub/app takes 6-7 minutes on a loaded machine, near go test's
# default of 10, whose panic names no failing condition; each test has its
# own deadlines that say what did not happen.
.PHONY: test-integration
test-integration: tools ## Integration tests against a real kube-apiserver (envtest).
	KUBEBUILDER_ASSETS=$(BIN) KUBE_CACHE_MUTATION_DETECTOR=true hack/test-recap.sh .local/test-integration.log go test $(GO_TEST_FLAGS) -timeout 30m -p 4 -parallel 4 $$(go list ./... | grep -v -E '/e2e(/realnode)?$$')

.PHONY: test-e2e
test-e2e: tools build ## End-to-end Ginkgo suite; E2E_PROVIDER=local (default) or kind.
	hack/test-recap.sh .local/test-e2e.log go test $(GO_TEST_FLAGS) -v -timeout 20m ./e2e/ -args -ginkgo.v

.PHONY: e2e
e2e: test-e2e ## Alias of test-e2e.

# Real kubelets on containerd, one network namespace per cluster
# (hack/realnode-up.sh; needs root and containerd, else the suite says why
# in one line and skips). Flotilla is installed as docs/install.md says:
# make build, make image, kustomize, Cluster objects, hack/agent-overlay.sh.
.PHONY: test-e2e-realnode
test-e2e-realnode: tools ## End-to-end specs on real nodes: the built image under the shipped manifests and RBAC (e2e/realnode).
	hack/test-recap.sh .local/test-e2e-realnode.log go test $(GO_TEST_FLAGS) -v -timeout 20m ./e2e/realnode/ -args -ginkgo.v

# `make soak`: SOAK_SCHEDULES random fault schedules (seeds printed; replay one
# with FLOTILLA_FAULT_SEED=N), SOAK_STEPS steps each.
SOAK_SCHEDULES ?= 50
SOAK_STEPS     ?= 25
.PHONY: soak
soak: tools ## Run SOAK_SCHEDULES (50) random fault schedules of SOAK_STEPS (25) steps against the real hub (test/faultschedule).
	KUBEBUILDER_ASSETS=$(BIN) SOAK_SCHEDULES=$(SOAK_SCHEDULES) FLOTILLA_FAULT_STEPS=$(SOAK_STEPS) go test -count=1 -v -timeout 300m -run TestFaultSchedules ./test/faultschedule/

.PHONY: clean
clean: ## Remove built binaries of the project (keeps the cached tools).
	rm -f $(BIN)/hub $(BIN)/agent
	rm -rf $(BIN)/image
