# tokensignin — the entry point for developers, packagers and operators. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

SWIFT        ?= swift
CONFIG       ?= release
BIN           = .build/$(CONFIG)/tokensignin
RUN_DIR      ?= $(CURDIR)/.run
# Developer machines only (`make deps`); a deployed host needs none of these (see the .deb's Depends).
FUZZ_SECONDS ?= 60
DEBIAN_PACKAGES = libfcgi-dev libfcgi-bin libssl-dev openssl libpq-dev libcurl4-openssl-dev ca-certificates \
                  postgresql postgresql-contrib nginx-light spawn-fcgi wrk pkg-config curl python3 python3-venv \
                  binutils dpkg-dev systemd systemd-container strace pgbouncer \
                  prometheus patroni etcd-server etcd-client haproxy python3-psycopg2 python3-cryptography python3-yaml
# prometheus: promtool and the server the monitoring tests run privately on a port of their own (on a host with
# systemd the package also starts its service on 9090, and its recommended node exporter on 9100: the tests never
# use them). python3-yaml: the tests read the rules' YAML. `make test-ha` runs its own etcd, Patroni nodes and
# HAProxy under .run/ha on loopback ports of its own (scripts/ha-cluster); the system services these packages bring
# (etcd on 2379, haproxy, patroni, which waits for an /etc/patroni/config.yml) are neither used nor in its way, and
# left as Debian installs them.
# The tests' Python packages from PyPI (Tests/requirements.txt: Prometheus' text parser, Selenium and pytest for
# the browser tests), pinned, in a private venv under .build.
VENV          = .build/venv
# The browser tests (Tests/Browser) also need Debian's Chromium and its driver. A host that only builds can skip
# them: `make deps build BROWSER=no`.
BROWSER        ?= yes
ifneq ($(BROWSER),no)
DEBIAN_PACKAGES += chromium chromium-driver
endif

# Where `make install` puts things; DESTDIR stages them under another root.
PREFIX       ?= /usr/local
BINDIR       ?= $(PREFIX)/bin
PKGDATADIR   ?= $(PREFIX)/share/tokensignin
DOCDIR       ?= $(PREFIX)/share/doc/tokensignin
UNITDIR      ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR  ?= $(PREFIX)/lib/sysusers.d
SYSCONFDIR   ?= /etc
NGINXDIR     ?= $(SYSCONFDIR)/nginx/tokensignin
STRIP        ?= strip
# The packaging examples installed under $(DOCDIR)/examples: monitoring and the high-availability layouts.
EXAMPLES     := prometheus grafana patroni haproxy
SERVICE_USER  = tokensignin

# The shipped binary: the Swift runtime and Foundation linked in, no $ORIGIN runpath; its own build folder so
# it never swaps places with the developer build in .build/release.
DIST_DIR      = .build/dist
DIST_BIN      = $(DIST_DIR)/release/tokensignin
VERSION      := $(shell sed -n 's/^ *public static let number = "\(.*\)"$$/\1/p' Sources/Logging/Version.swift)
# A release is Version.number; a build between releases may say so (DEB_VERSION=0.9.0+git20261201.1), or
# apt would take it for the package it already has.
DEB_VERSION  ?= $(VERSION)
DEB_ARCH     ?= $(shell dpkg --print-architecture 2>/dev/null)
DEB_MAINTAINER ?= tokensignin maintainers <tokensignin@localhost>
DEB_ROOT      = .build/deb/root
DEB_FILE      = .build/deb/tokensignin_$(DEB_VERSION)_$(DEB_ARCH).deb

# Operator targets run the installed binary with the installed settings, as the service's user; in a
# checkout without an installation, the binary already built here with the caller's own environment.
INSTALLED_BIN = $(BINDIR)/tokensignin
ENV_FILE     ?= $(wildcard $(SYSCONFDIR)/tokensignin/env)
TOKENSIGNIN  ?= $(firstword $(wildcard $(INSTALLED_BIN) $(BIN)))
RUN_AS       ?= $(if $(ENV_FILE),$(if $(filter 0,$(shell id -u)),$(SERVICE_USER)))
# Migrations run as the schema's owner (docs/database.md "Roles"): from the postgres account (peer authentication)
# with SET ROLE to it, followed by sql/roles.sql for what they added, the service's role being the account's
# name. MIGRATE_ROLE= runs them as the login alone and skips roles.sql (a deployment with one role for everything).
MIGRATE_AS   ?= $(if $(ENV_FILE),$(if $(filter 0,$(shell id -u)),postgres))
MIGRATE_ROLE ?= $(if $(ENV_FILE),tokensignin_owner)

.PHONY: help deps build test test-ops test-browser test-faults test-ha fuzz run restart stop bench clean dist install install-files \
        install-config uninstall deb migrate prune test-deploy

help: ## list the targets
	@awk -F':.*## ' '/^##@ / { printf "\n%s\n", substr($$0, 5) } /^[a-z-]+:.*## / { printf "  make %-15s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

##@ Developer (a checkout with the Swift toolchain; installs Debian packages with apt-get when missing)

deps: ## install the Debian packages it needs (apt-get; only what is missing) and the browser tests' venv
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi
	@$(MAKE) --no-print-directory $(VENV)/installed

build: deps ## build the tokensignin binary (release, for this machine: .build/release)
	$(SWIFT) build -c $(CONFIG) --product tokensignin

test: deps ## unit and end-to-end tests (private PostgreSQL and nginx, nothing system-wide)
	$(SWIFT) build --build-tests
	@mkdir -p .build; set -o pipefail; \
	scripts/with-test-db $(SWIFT) test --skip-build --skip "RestartEndToEndTests|IsolationEndToEndTests" 2>&1 | tee .build/test.log; status=$$?; \
	scripts/test-summary .build/test.log; exit $$status

test-browser: deps ## the example site in headless Chromium: sign-in, devices, sign-out, forgeries (Tests/Browser)
	$(SWIFT) build --product tokensignin
	@mkdir -p .build; set -o pipefail; \
	PYTHONDONTWRITEBYTECODE=1 SE_OFFLINE=true SE_AVOID_STATS=true TS_BIN=.build/debug/tokensignin \
	$(VENV)/bin/python -m pytest -c Tests/Browser/pytest.ini --rootdir=. Tests/Browser 2>&1 | tee .build/browser-test.log

# Debian's python3 (not whichever python3 comes first on PATH): python3-venv above is its venv module.
$(VENV)/installed: Tests/requirements.txt
	/usr/bin/python3 -m venv --clear $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r Tests/requirements.txt
	@touch $@

test-ops: deps deb ## packaging tests: the shipped binary without the toolchain, install and .deb in scratch roots, units, sandbox
	scripts/with-test-db scripts/test-ops $(DIST_BIN) $(DEB_FILE)

test-deploy: deb ## boot a copy of this host (systemd-nspawn, no toolchain) and walk docs/operations.md with the .deb and make install
	scripts/test-deploy $(DEB_FILE)

# Alone, not next to the other suites: it loads the machine as hard as it can, which upsets their timing.
test-faults: deps ## faults under load through nginx: restarts drop nothing, checks never wait on stuck sign-ins
	$(SWIFT) build --build-tests
	@mkdir -p .build; set -o pipefail; \
	scripts/with-test-db $(SWIFT) test --skip-build --no-parallel --filter "RestartEndToEndTests|IsolationEndToEndTests" 2>&1 | tee .build/test-faults.log; status=$$?; \
	scripts/test-summary .build/test-faults.log; exit $$status

test-ha: deps ## Patroni HA under load: switchover, kill -9 of the leader's postmaster, its Patroni stopped; both layouts
	$(SWIFT) build --product tokensignin
	@mkdir -p .build; set -o pipefail; scripts/test-ha 2>&1 | tee .build/test-ha.log

fuzz: deps ## run each fuzz target in Fuzz/ for FUZZ_SECONDS (60) with libFuzzer and ASan; fails on a crash
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz

run: build ## run it all locally (PostgreSQL, responder, nginx on https://127.0.0.1:8443) and show a sign-in
	scripts/local-run start

restart: build ## restart the local responder the way a deploy does: the socket stays open, nothing is dropped
	scripts/local-run restart

stop: ## stop what `make run` started
	scripts/local-run stop

bench: deps ## the benchmarks (bench/verify, signin, session, revocation, idle, mixed, responders): ratios against OpenSSL, pgbench, one responder
	bench/verify
	bench/signin
	bench/session
	bench/revocation
	bench/idle
	bench/mixed
	bench/responders

clean: ## remove build output and the local run folder
	-$(MAKE) stop
	-[ -d $(RUN_DIR)/pg ] && scripts/pgcluster destroy $(RUN_DIR)/pg
	rm -rf .build $(RUN_DIR)

##@ Packaging (on the build machine; the result runs without the Swift toolchain)

dist: deps ## the shipped binary (.build/dist/release/tokensignin): Swift runtime linked in, needs only Debian's libraries
	$(SWIFT) build -c release --product tokensignin --scratch-path $(DIST_DIR) --static-swift-stdlib --disable-local-rpath

install: dist install-files install-config ## install under PREFIX (/usr/local) and /etc, create the tokensignin user; DESTDIR=stage

install-files: ## the files of `make install` only (DESTDIR-aware; builds nothing, touches no account)
	@test -x $(DIST_BIN) || { echo "no $(DIST_BIN): run 'make dist' first" >&2; exit 1; }
	install -d -m 0755 $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGDATADIR)/sql $(DESTDIR)$(DOCDIR) $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(SYSCONFDIR)/tokensignin $(DESTDIR)$(NGINXDIR)
	install -m 0755 $(DIST_BIN) $(DESTDIR)$(BINDIR)/tokensignin
	$(if $(STRIP),$(STRIP) --strip-unneeded $(DESTDIR)$(BINDIR)/tokensignin)
	install -m 0644 sql/*.sql $(DESTDIR)$(PKGDATADIR)/sql/
	install -m 0644 docs/*.md $(DESTDIR)$(DOCDIR)/
	for dir in $(EXAMPLES); do \
		install -d -m 0755 $(DESTDIR)$(DOCDIR)/examples/$$dir && install -m 0644 packaging/$$dir/* $(DESTDIR)$(DOCDIR)/examples/$$dir/; \
	done
	@# The unit and env sources name the default prefix; another PREFIX is written into the installed copies.
	for unit in packaging/systemd/*; do \
		sed -e 's|/usr/local/bin/|$(BINDIR)/|g' $$unit > $(DESTDIR)$(UNITDIR)/$${unit##*/}; \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$${unit##*/}; \
	done
	install -m 0644 packaging/sysusers.conf $(DESTDIR)$(SYSUSERSDIR)/tokensignin.conf
	sed -e 's|/usr/local/share/tokensignin|$(PKGDATADIR)|g' packaging/env.example > $(DESTDIR)$(SYSCONFDIR)/tokensignin/env.example
	chmod 0644 $(DESTDIR)$(SYSCONFDIR)/tokensignin/env.example
	@# nginx files under /etc are the operator's once installed: a changed one is left alone, ours goes beside it.
	@for file in nginx/*.conf; do \
		target=$(DESTDIR)$(NGINXDIR)/$${file##*/}; \
		if [ ! -e $$target ] || cmp -s $$file $$target; then install -m 0644 $$file $$target; \
		else install -m 0644 $$file $$target.new; echo "kept your $$target; this release's is $$target.new"; fi; \
	done

install-config: ## the account and /etc/tokensignin/env (when absent) on this host; skipped under DESTDIR
ifeq ($(DESTDIR),)
	@if command -v systemd-sysusers >/dev/null; then systemd-sysusers $(SYSUSERSDIR)/tokensignin.conf; \
	elif ! getent passwd $(SERVICE_USER) >/dev/null; then \
		adduser --system --group --quiet --home /nonexistent --no-create-home --shell /usr/sbin/nologin $(SERVICE_USER); fi
	@if [ -e $(SYSCONFDIR)/tokensignin/env ]; then echo "kept $(SYSCONFDIR)/tokensignin/env"; \
	else install -m 0640 -o root -g $(SERVICE_USER) $(SYSCONFDIR)/tokensignin/env.example $(SYSCONFDIR)/tokensignin/env; \
		echo "created $(SYSCONFDIR)/tokensignin/env: set TOKENSIGNIN_CLIENT_IDS there"; fi
	@if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
else
	@echo "DESTDIR: no account or $(SYSCONFDIR)/tokensignin/env made; the target host makes them (packaging/debian/postinst)"
endif

uninstall: ## remove what `make install` put under PREFIX and /etc (not your env file, not the account)
	rm -f $(DESTDIR)$(BINDIR)/tokensignin $(DESTDIR)$(SYSUSERSDIR)/tokensignin.conf $(DESTDIR)$(SYSCONFDIR)/tokensignin/env.example
	rm -rf $(DESTDIR)$(PKGDATADIR) $(DESTDIR)$(DOCDIR)
	rm -f $(addprefix $(DESTDIR)$(UNITDIR)/,$(notdir $(wildcard packaging/systemd/*)))
	for file in nginx/*.conf; do cmp -s $$file $(DESTDIR)$(NGINXDIR)/$${file##*/} && rm -f $(DESTDIR)$(NGINXDIR)/$${file##*/}; true; done

deb: dist ## a Debian package (.build/deb/tokensignin_VERSION_ARCH.deb) of the same files for PREFIX=/usr
	rm -rf $(DEB_ROOT) && mkdir -p $(DEB_ROOT)/DEBIAN
	$(MAKE) --no-print-directory install-files DESTDIR=$(CURDIR)/$(DEB_ROOT) PREFIX=/usr
	@# Folders made along the way took the builder's umask; dpkg would create /usr/... with it.
	find $(DEB_ROOT) -type d -exec chmod 0755 {} +
	@# Depends: the packages of the libraries the binary links (dpkg-shlibdeps, from debian/control's folder).
	mkdir -p $(DEB_ROOT)/../shlibs/debian && printf 'Source: tokensignin\n\nPackage: tokensignin\nArchitecture: any\n' > $(DEB_ROOT)/../shlibs/debian/control
	shlibs=$$(cd $(DEB_ROOT)/../shlibs && dpkg-shlibdeps -O -e$(CURDIR)/$(DEB_ROOT)/usr/bin/tokensignin | sed -n 's/^shlibs:Depends=//p'); \
	test -n "$$shlibs"; \
	sed -e 's|@VERSION@|$(DEB_VERSION)|' -e 's|@ARCH@|$(DEB_ARCH)|' -e 's|@MAINTAINER@|$(DEB_MAINTAINER)|' \
	    -e "s|@SHLIBS@|$$shlibs|" -e "s|@INSTALLED_SIZE@|$$(du -sk --exclude=DEBIAN $(DEB_ROOT) | cut -f1)|" \
	    packaging/debian/control.in > $(DEB_ROOT)/DEBIAN/control
	cd $(DEB_ROOT) && find etc -type f | sed 's|^|/|' | sort > DEBIAN/conffiles
	install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm $(DEB_ROOT)/DEBIAN/
	dpkg-deb --root-owner-group -Zxz --build $(DEB_ROOT) $(DEB_FILE)

##@ Operator (a deployed host: the installed binary and /etc/tokensignin/env; builds and installs nothing)

migrate: ## apply the installed migrations (TOKENSIGNIN_SQL_DIR) to the database the env file names, then sql/roles.sql
	@test -n "$(TOKENSIGNIN)" || { echo "no tokensignin: install it (make install, or the .deb)" >&2; exit 1; }
	scripts/as-service "$(ENV_FILE)" "$(MIGRATE_AS)" -- $(TOKENSIGNIN) migrate $(if $(MIGRATE_ROLE),--role $(MIGRATE_ROLE))
	$(if $(MIGRATE_ROLE),scripts/as-service "$(ENV_FILE)" "$(MIGRATE_AS)" -- sh -c 'exec psql -X -q -v ON_ERROR_STOP=1 \
		-v owner=$(MIGRATE_ROLE) -v app=$(SERVICE_USER) -f "$${TOKENSIGNIN_SQL_DIR:-sql}/roles.sql"')

prune: ## delete expired, idle and long-revoked sessions and old audit rows now (what tokensignin-prune.timer runs hourly)
	@test -n "$(TOKENSIGNIN)" || { echo "no tokensignin: install it (make install, or the .deb)" >&2; exit 1; }
	scripts/as-service "$(ENV_FILE)" "$(RUN_AS)" -- $(TOKENSIGNIN) prune
