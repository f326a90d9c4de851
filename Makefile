# paysvc developer tasks. Run `make` (or `make help`) for the list.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO          ?= go
PG          := ops/pg/pg.sh
KAFKA       := ops/kafka/kafka.sh
BIN         := bin/paysvc
BENCH_BIN   := bin/paysvc-bench
PKGS        ?= ./...
GOTESTFLAGS ?= -race -count=1 -timeout 20m
BENCHFLAGS  ?=
FUZZTIME    ?= 30s
SDK_DIR     := api/sdktest
PYSDK_DIR   := api/sdktest/python
PYSDK_VENV  := .data/pysdk
BROWSER_DIR := api/browsertest

.PHONY: help pg pg-stop kafka kafka-stop build run cluster sdk pysdk browser prometheus kcat test test-cluster test-short bench bench-memory fuzz lint clean

help: ## Show this help
	@echo 'Usage: make <target> [VAR=value ...]'
	@echo
	@awk 'BEGIN {FS = ":.*?## "} /^[a-zA-Z0-9_.-]+:.*?## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo
	@echo 'Variables: GOTESTFLAGS="$(GOTESTFLAGS)" PKGS=$(PKGS) BENCHFLAGS=... FUZZTIME=$(FUZZTIME)'
	@echo '           PAYSVC_DATABASE_URL (run: use this DB instead of the private cluster)'
	@echo '           PAYSVC_PG_PORT (default 55432), PAYSVC_DATA_DIR (default .data)'
	@echo '           PAYSVC_KAFKA_PORT_BASE (kafka: brokers BASE..BASE+2, default 59092; 0 picks free ports)'

pg: ## Start the private PostgreSQL cluster (installs/initializes it if needed)
	@$(PG) start

pg-stop: ## Stop the private PostgreSQL cluster
	@$(PG) stop

# Apache Kafka from Maven Central jars (needs java 17+ and mvn, installed from
# Debian's packages when missing; the first start resolves the jars into
# .data/kafka-lib). See ops/kafka/kafka.sh for kill/term/start-node.
kafka: ## Start the private 3-node Apache Kafka cluster and print its bootstrap servers
	@command -v java >/dev/null && command -v mvn >/dev/null || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends openjdk-17-jre-headless maven)
	@$(KAFKA) start

kafka-stop: ## Stop the private Apache Kafka cluster
	@$(KAFKA) stop

build: ## Build bin/paysvc (stamped with its commit, for `paysvc version`)
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/paysvc

# `run` uses the private cluster unless PAYSVC_DATABASE_URL is already set
# (in the environment or on the make command line).
RUN_DEPS := build
ifeq ($(strip $(PAYSVC_DATABASE_URL)),)
RUN_DEPS += pg
endif

run: $(RUN_DEPS) ## Build and run the server (private cluster unless PAYSVC_DATABASE_URL is set)
	PAYSVC_DATABASE_URL="$${PAYSVC_DATABASE_URL:-$$($(PG) url)}" ./$(BIN) serve

# The production shape on one machine: Apache Kafka (a 3-node cluster of its own
# started by ops/kafka/kafka.sh when java and mvn are installed, else one
# `paysvc broker`), the private PostgreSQL, two processes of each role. ^C stops
# them all with SIGTERM.
cluster: build pg ## Run the production shape as processes: 3-node Apache Kafka (or paysvc broker without Java), 2 x api/engine/relay/rails/dispatcher (ops/cluster/cluster.sh)
	PAYSVC_BIN=$(BIN) ops/cluster/cluster.sh

# npm ci reruns only when a package-lock.json changes (or node_modules is gone);
# a harness directory without a package-lock.json is skipped silently.
NPM_DIRS    := $(foreach d,$(SDK_DIR) $(BROWSER_DIR) api/openapitest,$(if $(wildcard $(d)/package-lock.json),$(d)))
NPM_STAMPS  := $(addsuffix /node_modules/.paysvc-npm-ci.stamp,$(NPM_DIRS))

sdk: $(NPM_STAMPS) ## Install the Node test harnesses' deps (api/sdktest: the SDK; api/browsertest: playwright-core; api/openapitest: openapi-typescript, tsc)

%/node_modules/.paysvc-npm-ci.stamp: %/package-lock.json
	cd $* && npm ci --no-audit --no-fund
	@touch $@

# The hosted-page browser tests drive Debian's chromium (playwright-core downloads
# no browser of its own).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

browser: ## Install chromium for the browser tests (Debian package), if missing
	@command -v chromium >/dev/null || ($(SUDO) apt-get update && $(SUDO) apt-get install -y chromium)

# The official Python SDK (api/sdk_python_test.go) runs from a virtualenv of its
# own, rebuilt from scratch only when requirements.txt changes (or .data/pysdk is
# gone), so no package from an older pin lingers. Debian ships venv's ensurepip
# in python3-venv: installed when `python3 -m venv` fails (or python3 is missing).
PYSDK_STAMP := $(PYSDK_VENV)/.paysvc-pip.stamp

pysdk: $(PYSDK_STAMP) ## Install the official Python SDK (api/sdktest/python/requirements.txt) into a virtualenv in .data/pysdk

$(PYSDK_STAMP): $(PYSDK_DIR)/requirements.txt
	rm -rf $(PYSDK_VENV)
	@python3 -m venv $(PYSDK_VENV) 2>/dev/null || { rm -rf $(PYSDK_VENV); \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends python3-venv && \
		python3 -m venv $(PYSDK_VENV); }
	$(PYSDK_VENV)/bin/pip install --quiet --disable-pip-version-check --no-input -r $(PYSDK_DIR)/requirements.txt
	@touch $@

# Alert rules and dashboards are tested against Debian's prometheus and promtool.
prometheus: ## Install Debian's prometheus (prometheus, promtool) for the rules and dashboard tests, if missing
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends prometheus)

# TestDownstreamConsumerWithKcat (cmd/paysvc/service) reads the event topics as a
# downstream system does, with a standard client: Debian's kcat (librdkafka).
kcat: ## Install Debian's kcat for the downstream Kafka consumer test, if missing
	@command -v kcat >/dev/null || ($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends kcat)

# The whole-service, relay and dispatcher tests run on the private Apache Kafka
# cluster (topics/kafkatest), the rest on kfake; PAYSVC_TEST_KAFKA=real moves every
# test there, PAYSVC_TEST_KAFKA=kfake none. TestClusterUnderKills starts a cluster
# of its own.
test: pg kafka sdk pysdk browser prometheus kcat ## Run all tests (race detector) against the private PostgreSQL and Kafka clusters
	PAYSVC_TEST_DATABASE_URL="$$($(PG) url)" PAYSVC_TEST_KAFKA_BROKERS="$$($(KAFKA) brokers)" $(GO) test $(GOTESTFLAGS) $(PKGS)

# TestClusterUnderKills starts a private 3-node Apache Kafka cluster of its own
# with ops/kafka/kafka.sh (free ports, a temporary directory, destroyed at the end),
# so it needs java 17+ and mvn: installed here from Debian's packages when missing.
# PAYSVC_TEST_KAFKA=kfake runs it on one `paysvc broker` (kfake) instead.
test-cluster: pg build ## The production shape under process and Kafka-node kills, alone, on its own 3-node Apache Kafka (TestClusterUnderKills, also part of make test; about 4 min)
	@[[ "$${PAYSVC_TEST_KAFKA:-}" == kfake ]] || { command -v java >/dev/null && command -v mvn >/dev/null; } || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends openjdk-17-jre-headless maven)
	PAYSVC_TEST_DATABASE_URL="$$($(PG) url)" $(GO) test -count=1 -timeout 15m -run '^TestClusterUnderKills$$' -v ./cmd/paysvc/service

test-short: pg kafka kcat sdk pysdk browser prometheus ## Like test, without -race
	PAYSVC_TEST_DATABASE_URL="$$($(PG) url)" PAYSVC_TEST_KAFKA_BROKERS="$$($(KAFKA) brokers)" $(GO) test $(filter-out -race,$(GOTESTFLAGS)) $(PKGS)

# The load generator is its own binary; it starts bin/paysvc as the service it measures.
bench: pg build ## Build bin/paysvc-bench and run it (BENCHFLAGS=...) against the private cluster
	$(GO) build -o $(BENCH_BIN) ./cmd/paysvc-bench
	PAYSVC_DATABASE_URL="$$($(PG) url)" ./$(BENCH_BIN) --paysvc ./$(BIN) $(BENCHFLAGS)

bench-memory: pg build ## Service RSS with 1,000,000 wallets, 10,000 active (paysvc-bench --scenario wallets-1m; BENCHFLAGS=...)
	$(GO) build -o $(BENCH_BIN) ./cmd/paysvc-bench
	PAYSVC_DATABASE_URL="$$($(PG) url)" ./$(BENCH_BIN) --paysvc ./$(BIN) --scenario wallets-1m $(BENCHFLAGS)

fuzz: ## Fuzz the money parser (FuzzParse) and the request-text check (FuzzCheckJSONText), each for FUZZTIME (30s)
	$(GO) test ./actors/values/money -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME)
	$(GO) test ./api -run='^$$' -fuzz='^FuzzCheckJSONText$$' -fuzztime=$(FUZZTIME)

lint: ## go vet, staticcheck (pinned; fetched through the module proxy) and a gofmt check
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)
	@files="$$(find . \( -path ./.git -o -path ./.data -o -path ./bin -o -name node_modules -o -name testdata \) -prune \
		-o -type f -name '*.go' -print0 | xargs -0 -r gofmt -l)"; \
	if [[ -n "$$files" ]]; then echo "gofmt needed on:"; echo "$$files"; exit 1; fi

clean: ## Stop and delete the private PostgreSQL and Kafka clusters, remove .data and bin
	@$(PG) destroy
	@$(KAFKA) destroy
	rm -rf .data bin
