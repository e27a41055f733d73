"""The whole stack on one machine as child processes (RFC 13.1).

Postgres (embedded unless ``MEMBRANE_DATABASE_URL`` is set), Redis (``MEMBRANE_REDIS_URL``
if it answers, else a private ``redis-server``), the API, one Celery worker per queue,
beat and Flower. Every child runs in its own process group so stopping kills its
whole tree (prefork pool children included) and a Ctrl-C in the terminal reaches
only this supervisor, which then stops everything in reverse order.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx

from membrane_core import Settings
from membrane_core.storage import embedded, migrate

#: The Celery queues, one worker pool each (RFC 9.5).
QUEUES = ("ingest", "revision", "embedding", "llm", "maintenance")


class StackError(RuntimeError):
    """The stack could not start."""


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout):
        return True
    return False


def redis_reachable(url: str) -> bool:
    """True when the Redis of ``url`` accepts connections."""
    parsed = urlparse(url)
    if parsed.scheme == "unix":
        return Path(parsed.path).exists()
    return port_open(parsed.hostname or "127.0.0.1", parsed.port or 6379)


def rss_kib(pid: int) -> int | None:
    """Resident set size of ``pid`` in KiB from ``/proc/<pid>/status`` (VmRSS)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (via ``/proc/<pid>/task/*/children``)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    return out


@dataclass
class Child:
    """One supervised process."""

    name: str
    argv: list[str]
    log: Path
    url: str | None = None
    proc: subprocess.Popen[bytes] | None = None


@dataclass
class StackOptions:
    """What to start and where."""

    data_dir: Path
    host: str = "127.0.0.1"
    api_port: int = 8080
    flower_port: int = 5555
    queues: tuple[str, ...] = QUEUES
    #: Processes per pool; a queue left out gets the workers package's default.
    concurrency: dict[str, int] = field(default_factory=dict)
    beat: bool = True
    flower: bool = True
    flower_open: bool = False
    stop_database: bool = True


class Stack:
    """Start, watch and stop the stack's processes (RFC 13.1)."""

    def __init__(self, settings: Settings, options: StackOptions) -> None:
        self.settings = settings
        self.opts = options
        self.children: list[Child] = []
        self.dsn = ""
        self.redis_url = ""
        self.flower_auth: str | None = None
        self.embedded = False
        self._redis: subprocess.Popen[bytes] | None = None
        self.logs = options.data_dir / "logs"

    # -- start ------------------------------------------------------------------

    def start_database(self) -> str:
        """The configured Postgres, or the embedded one; migrated (RFC 11.2)."""
        configured = self.settings.database_dsn()
        self.embedded = configured is None
        self.dsn = configured or embedded.dsn(self.opts.data_dir)
        migrate.migrate(self.dsn, self.settings.embedding_dim)
        return self.dsn

    def start_redis(self) -> str:
        """``MEMBRANE_REDIS_URL`` if it answers, else a private ``redis-server`` on loopback."""
        url = self.settings.redis_url
        if url and redis_reachable(url):
            self.redis_url = url
            return url
        exe = shutil.which("redis-server")
        if exe is None:
            hint = f"MEMBRANE_REDIS_URL={url} does not answer and " if url else ""
            raise StackError(
                f"{hint}redis-server is not on PATH. Install it (Debian/Ubuntu: "
                "sudo apt-get install -y redis-server; macOS: brew install redis) "
                "or point MEMBRANE_REDIS_URL at a running Redis."
            )
        port = free_port()
        workdir = self.opts.data_dir / "redis"
        workdir.mkdir(parents=True, exist_ok=True)
        self._redis = self._spawn(
            "redis", [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                      "--appendonly", "no", "--dir", str(workdir), "--loglevel", "warning"])
        deadline = time.monotonic() + 10
        while not port_open("127.0.0.1", port):
            if self._redis.poll() is not None or time.monotonic() > deadline:
                raise StackError(f"redis-server did not start; see {self.logs / 'redis.log'}")
            time.sleep(0.05)
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        return self.redis_url

    def env(self) -> dict[str, str]:
        """The children's environment: the resolved database and broker URLs."""
        env = dict(os.environ)
        env["MEMBRANE_DATABASE_URL"] = self.dsn
        env["MEMBRANE_REDIS_URL"] = self.redis_url
        env["MEMBRANE_DATA_DIR"] = str(self.opts.data_dir)
        env.setdefault("PYTHONUNBUFFERED", "1")
        if self.opts.flower and not self.opts.flower_open:
            configured = self.settings.flower_basic_auth
            self.flower_auth = (configured.get_secret_value() if configured
                                else f"admin:{secrets.token_urlsafe(12)}")
            env["MEMBRANE_FLOWER_BASIC_AUTH"] = self.flower_auth
        return env

    def plan(self) -> list[Child]:
        """The argv of every child (API, workers, beat, Flower), from the workers package."""
        from workers import app as celery_app  # the argv of each pool is the pipeline's to define

        o = self.opts
        kids = [Child("api", [sys.executable, "-m", "api", "--host", o.host, "--port", str(o.api_port)],
                      self.logs / "api.log", url=f"http://{o.host}:{o.api_port}")]
        for q in o.queues:
            kids.append(Child(f"worker-{q}",
                              celery_app.worker_argv(q, concurrency=o.concurrency.get(q)),
                              self.logs / f"worker-{q}.log"))
        if o.beat:
            kids.append(Child("beat", celery_app.beat_argv(str(o.data_dir / "celerybeat-schedule")),
                              self.logs / "beat.log"))
        if o.flower:
            kids.append(Child("flower", celery_app.flower_argv(
                self.settings, address=o.host, port=o.flower_port, open_access=o.flower_open),
                self.logs / "flower.log", url=f"http://{o.host}:{o.flower_port}"))
        return kids

    def start(self, wait_ready: float = 120.0) -> None:
        """Start everything; returns once the API answers ``/readyz``."""
        self.logs.mkdir(parents=True, exist_ok=True)
        try:
            self.start_database()
            self.start_redis()
            for port, what in ((self.opts.api_port, "API"), (self.opts.flower_port, "Flower")):
                if (what == "API" or self.opts.flower) and port_open(self.opts.host, port):
                    raise StackError(f"port {port} for the {what} is already in use")
            env = self.env()
            for child in self.plan():
                child.proc = self._spawn(child.name, child.argv, env)
                self.children.append(child)
            self.wait_ready(wait_ready)
        except BaseException:
            self.stop()
            raise

    def wait_ready(self, timeout: float) -> None:
        """Poll the API's ``/readyz`` until it answers 200."""
        url = f"http://{self.opts.host}:{self.opts.api_port}/readyz"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = self.dead()
            if dead:
                raise StackError(f"{dead.name} exited during start-up:\n{self.tail(dead)}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=2).status_code == 200:
                    return
            time.sleep(0.25)
        raise StackError(f"the API was not ready after {timeout:.0f}s; see {self.logs / 'api.log'}")

    # -- watch and stop -----------------------------------------------------------

    def dead(self) -> Child | None:
        """The first child that exited, if any."""
        return next((c for c in self.children if c.proc and c.proc.poll() is not None), None)

    def tail(self, child: Child, lines: int = 20) -> str:
        """The last lines of a child's log."""
        with contextlib.suppress(OSError):
            return "\n".join(child.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def pids(self) -> dict[str, int]:
        """Main pid of every running child."""
        return {c.name: c.proc.pid for c in self.children if c.proc and c.proc.poll() is None}

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM every process group in reverse start order, SIGKILL what outlives ``timeout``."""
        procs = [c.proc for c in reversed(self.children) if c.proc] + ([self._redis] if self._redis else [])
        for p in procs:
            _signal_group(p, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(p, signal.SIGKILL)
                p.wait(5)
            _signal_group(p, signal.SIGKILL)  # stragglers left in the group (pool children)
        self.children.clear()
        self._redis = None
        if self.embedded and self.opts.stop_database:
            with contextlib.suppress(Exception):
                embedded.stop(self.opts.data_dir)
            self.embedded = False

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None,
               ) -> subprocess.Popen[bytes]:
        # Own session = own process group: the terminal's Ctrl-C reaches only the supervisor.
        self.logs.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.logs / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=fd,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            os.close(fd)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
