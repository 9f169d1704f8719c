"""The browser suite's private stack: a PostgreSQL cluster, `tokensignin serve`, nginx with the example site."""

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]

# Below the kernel's ephemeral range and below the end-to-end tests' random ports (20000 and up), so the suite
# runs beside `make test` and `make run` (8443...8445).
BASE_PORT = int(os.environ.get("BROWSER_PORT", "18443"))
PG_PORT = int(os.environ.get("BROWSER_PGPORT", "55436"))

# Generous bounds for waits on events (a socket appearing, a process exiting), never for ordering.
START_DEADLINE = 60.0


class StackError(Exception):
    """The stack could not be started: the message names the step and what it printed."""


@dataclass(frozen=True)
class Account:
    sub: str
    email: str
    name: str


@dataclass(frozen=True)
class Answer:
    """An HTTP answer to a request the test sent itself (not the browser)."""

    status: int
    headers: dict
    body: str

    @property
    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return {}


class Stack:
    """Everything `make run` starts in development mode, on the suite's own ports and folders under .build/."""

    client_id = "100000000000-browsertests.apps.googleusercontent.com"
    ada = Account("3000000000000000000001", "ada@example.com", "Ada Lovelace")
    grace = Account("3000000000000000000002", "grace@example.com", "Grace Hopper")
    session_ttl = 86_400

    def __init__(self):
        self.binary = (REPOSITORY / os.environ.get("TS_BIN", ".build/debug/tokensignin")).resolve()
        self.root = REPOSITORY / ".build/browser"
        self.artifacts = self.root / "artifacts"
        self.port = BASE_PORT
        self.app_port = BASE_PORT + 1
        self.standin_port = BASE_PORT + 2
        # (BASE_PORT + 3 to + 5 are the forgers' sites, conftest.py.) nginx's operators' listener: its own port,
        # not the shipped 9464 that `make run` uses.
        self.operators_port = BASE_PORT + 6
        self.site = f"https://127.0.0.1:{self.port}"
        # Another site than 127.0.0.1 for the browser (a different host), as accounts.google.com is.
        self.standin = f"https://localhost:{self.standin_port}"
        self.pg_dir = self.root / "pg"
        self.nginx_dir = self.root / "nginx"
        self.socket = self.root / "fcgi.sock"
        self.server = None
        self.environment = {}
        self.keys = None

    # MARK: start and stop

    def start(self):
        if not self.binary.is_file():
            raise StackError(f"{self.binary} is missing: `make test-browser` builds it (swift build)")
        for port in (self.port, self.app_port, self.standin_port, self.operators_port):
            require_free_port(port)
        self.stop_leftovers()
        shutil.rmtree(self.root, ignore_errors=True)
        self.artifacts.mkdir(parents=True)

        cluster = str(REPOSITORY / "scripts/pgcluster")
        self.run("pgcluster", [cluster, "start", str(self.pg_dir), str(PG_PORT)])
        # `pgcluster env` prints one `export NAME='value' ...` line: libpq's variables for this cluster.
        exports = self.run("pgcluster env", [cluster, "env", str(self.pg_dir), str(PG_PORT)]).split()
        self.environment = dict(item.replace("'", "").split("=", 1) for item in exports if "=" in item)
        self.run("migrate", [str(self.binary), "migrate"])
        keys = self.root / "keys"
        self.run("dev keygen", [str(self.binary), "dev", "keygen", "--out", str(keys)])
        self.keys = keys

        self.start_server(keys)
        accounts = [f"{a.sub}|{a.email}|{a.name}" for a in (self.ada, self.grace)]
        self.run("example-site", [
            str(REPOSITORY / "scripts/example-site"), "--out", str(self.nginx_dir / "example"),
            "--client-id", self.client_id, "--stand-in", self.standin,
            "--login-uri", f"{self.site}/tokensignin", "--bin", str(self.binary), "--keys", str(keys),
            *[item for account in accounts for item in ("--account", account)],
        ])
        self.run("nginx-local", [
            str(REPOSITORY / "scripts/nginx-local"), "start", str(self.nginx_dir), str(self.port), str(self.socket),
            str(self.app_port),
        ], extra={"NGINX_STANDIN_PORT": str(self.standin_port), "NGINX_RATE_LIMIT": "off",
                  "NGINX_METRICS_PORT": str(self.operators_port)})

    def start_server(self, keys):
        environment = {
            "TOKENSIGNIN_LISTEN": str(self.socket),
            "TOKENSIGNIN_CLIENT_IDS": self.client_id,
            "TOKENSIGNIN_JWKS_FILE": str(keys / "dev-jwks.json"),
            "TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS": "1",
            "TOKENSIGNIN_RISC_CONFIGURATION_URL": "off",
            "TOKENSIGNIN_WORKERS": "2",
            "TOKENSIGNIN_SITE_ORIGINS": self.site,
            "TOKENSIGNIN_SIGNIN_REDIRECT": "/app/",
            "TOKENSIGNIN_WEB_FORM_ORIGINS": self.standin,
            "TOKENSIGNIN_SESSION_TTL": str(self.session_ttl),
        }
        log = open(self.root / "tokensignin.log", "ab")
        self.server = subprocess.Popen([str(self.binary), "serve"], cwd=REPOSITORY, stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=log, env=self.env(environment))
        log.close()
        (self.root / "tokensignin.pid").write_text(str(self.server.pid))
        deadline = time.monotonic() + START_DEADLINE
        while not self.socket.exists():
            if self.server.poll() is not None:
                raise StackError(f"tokensignin serve exited with {self.server.returncode}: {self.server_log()}")
            if time.monotonic() > deadline:
                raise StackError(f"tokensignin serve did not listen on {self.socket}: {self.server_log()}")
            time.sleep(0.02)

    def stop(self):
        subprocess.run([str(REPOSITORY / "scripts/nginx-local"), "stop", str(self.nginx_dir)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self.server is not None and self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
            try:
                self.server.wait(timeout=START_DEADLINE)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        subprocess.run([str(REPOSITORY / "scripts/pgcluster"), "destroy", str(self.pg_dir), str(PG_PORT)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop_leftovers(self):
        """A run that crashed may have left its nginx, responder and cluster behind: stop exactly those."""
        pid_file = self.root / "tokensignin.pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            except (ValueError, ProcessLookupError, PermissionError):
                pass
        if self.nginx_dir.exists():
            subprocess.run([str(REPOSITORY / "scripts/nginx-local"), "stop", str(self.nginx_dir)], check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self.pg_dir.exists():
            subprocess.run([str(REPOSITORY / "scripts/pgcluster"), "destroy", str(self.pg_dir), str(PG_PORT)],
                           check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    # MARK: helpers

    def env(self, extra=None):
        return {**os.environ, **self.environment, **(extra or {})}

    def run(self, step, arguments, extra=None):
        result = subprocess.run(arguments, cwd=REPOSITORY, env=self.env(extra), stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, timeout=START_DEADLINE)
        if result.returncode != 0:
            raise StackError(f"{step} failed ({result.returncode}): {result.stderr.strip() or result.stdout.strip()}")
        return result.stdout

    def server_log(self):
        path = self.root / "tokensignin.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def token(self, account, ttl=3600):
        """A fresh development ID token for `account`, signed by this stack's key."""
        kid = (self.keys / "kid").read_text().strip()
        return self.run("dev token", [
            str(self.binary), "dev", "token", "--key", str(self.keys / "dev-signing-key.pem"), "--kid", kid,
            "--aud", self.client_id, "--sub", account.sub, "--email", account.email, "--name", account.name,
            "--ttl", str(ttl),
        ]).strip()

    def request(self, method, path, headers=None, body=None):
        """One request through nginx, as a native client would send it (not the browser)."""
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        data = body.encode() if isinstance(body, str) else body
        request = urllib.request.Request(self.site + path, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(request, context=context, timeout=20) as answer:
                return Answer(answer.status, dict(answer.headers), answer.read().decode())
        except urllib.error.HTTPError as error:
            return Answer(error.code, dict(error.headers), error.read().decode())

    def psql(self, sql):
        """Rows of a query as lists of text."""
        result = subprocess.run(["psql", "-X", "-q", "-t", "-A", "-F", "\x1f", "-v", "ON_ERROR_STOP=1", "-c", sql],
                                env=self.env(), capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            raise StackError(f"psql failed: {result.stderr.strip()}")
        return [line.split("\x1f") for line in result.stdout.splitlines() if line]

    def sessions(self, account):
        """(id, revoked_reason or '') of every session of `account`, oldest first."""
        return [(int(row[0]), row[1]) for row in self.psql(
            "SELECT s.id, coalesce(s.revoked_reason, '') FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id "
            f"WHERE u.google_sub = '{account.sub}' ORDER BY s.id")]

    def methods_received(self, path):
        """The methods of every request nginx logged for `path` (its access log: `"METHOD PATH HTTP/x"`)."""
        methods = []
        for line in (self.nginx_dir / "access.log").read_text().splitlines():
            request = line.split('"')[1].split(" ") if line.count('"') >= 2 else []
            if len(request) == 3 and request[1] == path:
                methods.append(request[0])
        return methods

    def live_sessions(self, account):
        return [session_id for session_id, reason in self.sessions(account) if reason == ""]


def require_free_port(port):
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            raise StackError(f"port {port} is taken ({error}); set BROWSER_PORT to move the suite's ports") from error
