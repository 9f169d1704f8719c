# tokensignin — the operator's entry point. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

SWIFT        ?= swift
CONFIG       ?= release
BIN           = .build/$(CONFIG)/tokensignin
RUN_DIR      ?= $(CURDIR)/.run
FUZZ_SECONDS ?= 60
DEBIAN_PACKAGES = libfcgi-dev libfcgi-bin libssl-dev openssl libpq-dev libcurl4-openssl-dev ca-certificates \
                  postgresql postgresql-contrib nginx-light spawn-fcgi wrk pkg-config curl python3

.PHONY: help deps build test test-faults fuzz run restart stop migrate prune bench clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

deps: ## install the Debian packages it needs (apt-get; only what is missing)
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

build: deps ## build the tokensignin binary (release)
	$(SWIFT) build -c $(CONFIG) --product tokensignin

test: deps ## unit and end-to-end tests (private PostgreSQL and nginx, nothing system-wide)
	$(SWIFT) build --build-tests
	@mkdir -p .build; set -o pipefail; \
	scripts/with-test-db $(SWIFT) test --skip-build --skip RestartEndToEndTests 2>&1 | tee .build/test.log; status=$$?; \
	scripts/test-summary .build/test.log; exit $$status

# Alone, not next to the other suites: it loads the machine as hard as it can, which upsets their timing.
test-faults: deps ## restarts under sign-in load through nginx: nothing may be dropped
	$(SWIFT) build --build-tests
	@mkdir -p .build; set -o pipefail; \
	scripts/with-test-db $(SWIFT) test --skip-build --filter RestartEndToEndTests 2>&1 | tee .build/test-faults.log; status=$$?; \
	scripts/test-summary .build/test-faults.log; exit $$status

fuzz: deps ## run each fuzz target in Fuzz/ for FUZZ_SECONDS (60) with libFuzzer and ASan; fails on a crash
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz

run: build ## run it all locally (PostgreSQL, responder, nginx on https://127.0.0.1:8443) and show a sign-in
	scripts/local-run start

restart: build ## restart the local responder the way a deploy does: the socket stays open, nothing is dropped
	scripts/local-run restart

stop: ## stop what `make run` started
	scripts/local-run stop

migrate: build ## apply the migrations in sql/ to the database in PG* / TOKENSIGNIN_DATABASE_URL
	$(BIN) migrate

prune: build ## delete expired sessions and old audit rows (what the systemd timer in docs/systemd runs)
	$(BIN) prune

bench: deps ## the benchmarks (bench/verify, bench/signin, bench/session): ratios against OpenSSL and pgbench
	bench/verify
	bench/signin
	bench/session

clean: ## remove build output and the local run folder
	-$(MAKE) stop
	rm -rf .build $(RUN_DIR)
