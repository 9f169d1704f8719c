# tokensignin — the operator's entry point. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

SWIFT        ?= swift
CONFIG       ?= release
BIN           = .build/$(CONFIG)/tokensignin
RUN_DIR      ?= $(CURDIR)/.run
DEBIAN_PACKAGES = libfcgi-dev libfcgi-bin libssl-dev openssl libpq-dev libcurl4-openssl-dev ca-certificates \
                  postgresql postgresql-contrib nginx-light spawn-fcgi wrk pkg-config curl python3 python3-venv
# The tests' Python packages from PyPI (Tests/requirements.txt: Prometheus' text parser, Selenium and pytest for
# the browser tests), pinned, in a private venv under .build.
VENV          = .build/venv
# The browser tests (Tests/Browser) also need Debian's Chromium and its driver. A host that only builds can skip
# them: `make deps build BROWSER=no`.
BROWSER        ?= yes
ifneq ($(BROWSER),no)
DEBIAN_PACKAGES += chromium chromium-driver
endif

.PHONY: help deps build test run stop migrate prune bench clean test-browser

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

deps: ## install the Debian packages it needs (apt-get; only what is missing) and the browser tests' venv
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi
	@$(MAKE) --no-print-directory $(VENV)/installed

build: deps ## build the tokensignin binary (release)
	$(SWIFT) build -c $(CONFIG) --product tokensignin

test: deps ## unit and end-to-end tests (private PostgreSQL and nginx, nothing system-wide)
	$(SWIFT) build --build-tests
	@mkdir -p .build; set -o pipefail; \
	scripts/with-test-db $(SWIFT) test --skip-build 2>&1 | tee .build/test.log; status=$$?; \
	scripts/test-summary .build/test.log; exit $$status

test-browser: deps ## the example site in headless Chromium: sign-in, devices, sign-out, forgeries (Tests/Browser)
	$(SWIFT) build --product tokensignin
	@mkdir -p .build; set -o pipefail; \
	PYTHONDONTWRITEBYTECODE=1 SE_OFFLINE=true SE_AVOID_STATS=true TOKENSIGNIN_BIN=.build/debug/tokensignin \
	$(VENV)/bin/python -m pytest -c Tests/Browser/pytest.ini --rootdir=. Tests/Browser 2>&1 | tee .build/browser-test.log

# Debian's python3 (not whichever python3 comes first on PATH): python3-venv above is its venv module.
$(VENV)/installed: Tests/requirements.txt
	/usr/bin/python3 -m venv --clear $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r Tests/requirements.txt
	@touch $@

run: build ## run it all locally (PostgreSQL, responder, nginx on https://127.0.0.1:8443) and show a sign-in
	scripts/local-run start

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
	-[ -d $(RUN_DIR)/pg ] && scripts/pgcluster destroy $(RUN_DIR)/pg
	rm -rf .build $(RUN_DIR)
