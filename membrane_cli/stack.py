"""The whole stack on one machine as child processes (RFC 13.1).

Postgres (embedded unless ``MEMBRANE_DATABASE_URL`` is set), Redis (``MEMBRANE_REDIS_URL``
if it answers, else a private ``redis-server``), the API, one Celery worker per queue,
beat and Flower. Every child runs in its own process group so stopping kills its
whole tree (prefork pool children included) and a Ctrl-C in the terminal reaches
only this supervisor, which then stops everything in reverse order.

:meth:`Stack.watch` is one look at every child and at the embedded Postgres: the
private ``redis-server`` is restarted on its port and a crashed embedded Postgres on its
socket, each within a budget, while the other children ride out the outage; anything else
that dies stops the stack. Every start, death and restart is written to
``logs/supervisor.log``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

import httpx

from api.keyfile import configured_keys
from membrane_core import Settings
from membrane_core.listen import Listen, check_credentials, plan_listen, tls_files
from membrane_core.storage import embedded, migrate, standby

#: The Celery queues, one worker pool each (RFC 9.5).
QUEUES = ("ingest", "revision", "embedding", "llm", "maintenance")

#: How often ``membrane run`` calls :meth:`Stack.watch`, in seconds (RFC 13.1).
WATCH_SECONDS = 0.5

#: prometheus_client's multiprocess directory (RFC 14.2): one per pool, under the data dir.
METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


def redis_argv(exe: str, port: int, workdir: Path, bind: Sequence[str] = ("127.0.0.1",)) -> list[str]:
    """RFC 9.5, 13.1: a private ``redis-server`` as the stack runs it: on ``bind`` and ``port``,
    without persistence (it carries only operation ids: the inbox is Postgres), and refusing a
    publish when full (the operation waits in Postgres for re-dispatch) rather than dropping a
    message it holds."""
    return [
        exe,
        "--port",
        str(port),
        "--bind",
        *bind,
        "--save",
        "",
        "--appendonly",
        "no",
        "--maxmemory-policy",
        "noeviction",
        "--dir",
        str(workdir),
        "--loglevel",
        "warning",
    ]


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


def pid_alive(pid: int) -> bool:
    """True when ``pid`` runs; a zombie (dead, not yet reaped) counts as gone."""
    if Path("/proc/self/stat").exists():
        try:
            # the state follows the parenthesised command name, which may itself hold spaces
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            return False
        return state not in {"Z", "X"}
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by another user (pgserver's user under root)
    return True


def exit_status(returncode: int) -> str:
    """``exit status N`` or ``killed by signal N (SIGNAME)`` for a Popen return code."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown"
        return f"killed by signal {-returncode} ({name})"
    return f"exit status {returncode}"


def spend_restart(times: list[float], now: float, limit: int, window: float) -> bool:
    """RFC 13.1: count a restart at ``now`` unless ``limit`` were counted within ``window`` seconds.

    ``times`` holds the monotonic times of the restarts counted so far; those older than
    the window are dropped. Returns False, counting nothing, when the budget is spent.
    """
    times[:] = [t for t in times if now - t < window]
    if len(times) >= limit:
        return False
    times.append(now)
    return True


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


#: ``/proc/<pid>/stat`` counts CPU time in these ticks.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid``, its reaped children and its live descendants (``/proc/<pid>/stat``)."""
    total = 0
    for n, p in enumerate(process_tree(pid)):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        # utime, stime (fields 14, 15), then cutime, cstime of the root only: a live
        # descendant's time is its own, a reaped one's is in its parent's
        total += int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if n == 0 else 0)
    return total / CLOCK_TICKS


@dataclass
class Child:
    """One supervised process."""

    name: str
    argv: list[str]
    log: Path
    url: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    #: Loopback port that accepts connections once the child is up.
    port: int | None = None
    #: Restarted with the same argv (so on the same port) when it dies (RFC 13.1).
    restart: bool = False
    #: Monotonic times of its restarts inside the current budget window.
    restarts: list[float] = field(default_factory=list)
    #: Variables of its own on top of the stack's environment (a pool's metrics port).
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Watch:
    """What one look at the stack found (RFC 13.1)."""

    #: Deaths and restarts, already written to the supervisor log, to print.
    events: list[str] = field(default_factory=list)
    #: Why the stack must stop, or ``None`` while it runs on.
    stop: str | None = None


#: RFC 10.5: the database role of each pool's queue (its timeouts); the others are ``pool``.
ROLES = {"maintenance": "sweep"}


@dataclass
class StackOptions:
    """What to start and where."""

    data_dir: Path
    host: str = "127.0.0.1"
    api_port: int = 8080
    flower_port: int = 5555
    #: RFC 14.2: the first pool's ``/metrics`` port on loopback, the next pools' the ports
    #: after it in the order of ``queues``; ``None`` serves none.
    worker_metrics_port: int | None = 9808
    queues: tuple[str, ...] = QUEUES
    #: Processes per pool; a queue left out gets the workers package's default.
    concurrency: dict[str, int] = field(default_factory=dict)
    beat: bool = True
    flower: bool = True
    flower_open: bool = False
    stop_database: bool = True
    #: Restart budget of the private redis-server: at most ``restart_limit`` restarts
    #: within any ``restart_window`` seconds, then the stack stops (RFC 13.1).
    restart_limit: int = 5
    restart_window: float = 60.0
    #: Restart budget of the embedded Postgres after a crash: at most
    #: ``postgres_restart_limit`` restarts within any ``postgres_restart_window`` seconds,
    #: each accepting connections (crash recovery done) within ``postgres_start_timeout``
    #: seconds, else the stack stops (RFC 13.1).
    postgres_restart_limit: int = 3
    postgres_restart_window: float = 300.0
    postgres_start_timeout: float = 60.0
    #: RFC 13.2: also run a streaming replica of the embedded Postgres (in ``data_dir/standby``)
    #: and point the children's reads at it
    replica: bool = False


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
        #: The embedded server's socket folder and port, where a restart puts it again.
        self.postmaster: embedded.Postmaster | None = None
        #: Monotonic times of the embedded Postgres's restarts inside the budget window.
        self.postgres_restarts: list[float] = []
        #: RFC 13.2: the replica of ``--replica``, and the URL the children read from
        self.standby: standby.Standby | None = None
        self.read_dsn: str | None = None
        self.logs = options.data_dir / "logs"
        self.listen = Listen()
        #: Warnings of the listen rules (RFC 7.5), to print at start.
        self.warnings: list[str] = []

    @property
    def pgdata(self) -> Path:
        """The embedded server's data folder (RFC 11.2)."""
        return self.opts.data_dir / "pg"

    @property
    def postgres_log(self) -> Path:
        """Where the embedded server logs (``pg_ctl -l``)."""
        return self.pgdata / "log"

    @property
    def supervisor_log(self) -> Path:
        """Starts, deaths and restarts of the children (RFC 13.1)."""
        return self.logs / "supervisor.log"

    @property
    def api_url(self) -> str:
        """The API's base URL, ``https`` when TLS is configured (RFC 7.5)."""
        return f"{self.listen.scheme}://{self.opts.host}:{self.opts.api_port}"

    # -- start ------------------------------------------------------------------

    def preflight(self) -> Listen:
        """RFC 7.5: the listen rules of the API and of Flower, checked before anything starts.

        Raises the ``MembraneError`` of the API entry point (refusal, TLS files); the
        warnings of the insecure opt-in are kept in :attr:`warnings`.
        """
        s, o = self.settings, self.opts
        self.listen = plan_listen(
            o.host,
            configured_keys(s),  # RFC 10.3: a key file that does not load starts nothing
            certfile=s.tls_certfile,
            keyfile=s.tls_keyfile,
            allow_insecure=s.allow_insecure_credentials,
        )
        self.warnings = [self.listen.warning] if self.listen.warning else []
        # Flower uses configured basic auth even when opened (workers.flower), and the
        # stack generates one unless opened
        if o.flower and (not o.flower_open or s.flower_basic_auth is not None):
            warning = check_credentials(
                o.host,
                "Flower basic auth",
                tls=tls_files(s.tls_certfile, s.tls_keyfile),
                allow_insecure=s.allow_insecure_credentials,
            )
            if warning:
                self.warnings.append(warning)
        return self.listen

    def start_database(self) -> str:
        """The configured Postgres, or the embedded one; migrated (RFC 11.2)."""
        configured = self.settings.database_dsn()
        self.embedded = configured is None
        self.dsn = configured or embedded.dsn(self.opts.data_dir)
        if self.embedded:
            self.postmaster = embedded.postmaster(self.opts.data_dir)
        migrate.migrate(self.dsn, self.settings.embedding_dim)
        if self.opts.replica:
            if not self.embedded:
                raise StackError(
                    "--replica makes a replica of the embedded Postgres; MEMBRANE_DATABASE_URL is set"
                )
            # RFC 13.2: a hot standby beside the data, made once and started with the stack
            self.standby = standby.running(self.opts.data_dir / "standby", self.opts.data_dir)
            self.read_dsn = self.standby.dsn
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
        # It carries only operation ids (the inbox is Postgres), so a restart loses nothing
        # that beat does not re-dispatch: it is restarted on this port when it dies.
        child = Child(
            "redis",
            redis_argv(exe, port, workdir),
            self.logs / "redis.log",
            url=f"redis://127.0.0.1:{port}/0",
            port=port,
            restart=True,
        )
        self._launch(child)
        self.children.append(child)
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        return self.redis_url

    def _launch(self, child: Child, env: dict[str, str] | None = None, timeout: float = 10.0) -> None:
        """Spawn ``child``; with a port, wait until it accepts connections."""
        child.proc = self._spawn(child.name, child.argv, env)
        if child.port is None:
            return
        deadline = time.monotonic() + timeout
        while not port_open("127.0.0.1", child.port):
            if child.proc.poll() is not None or time.monotonic() > deadline:
                raise StackError(
                    f"{Path(child.argv[0]).name} did not start on port {child.port}; see {child.log}"
                )
            time.sleep(0.05)

    def env(self) -> dict[str, str]:
        """The children's environment: the resolved database and broker URLs."""
        env = dict(os.environ)
        env["MEMBRANE_DATABASE_URL"] = self.dsn
        env["MEMBRANE_REDIS_URL"] = self.redis_url
        env["MEMBRANE_DATA_DIR"] = str(self.opts.data_dir)
        if self.read_dsn is not None:  # RFC 13.2: --replica
            env["MEMBRANE_READ_DATABASE_URL"] = self.read_dsn
        elif self.settings.read_database_url is None:  # RFC 13.2: reads go where the stack's do
            env.pop("MEMBRANE_READ_DATABASE_URL", None)
        env.setdefault("PYTHONUNBUFFERED", "1")
        # RFC 14.2: a multiprocess directory is one process tree's; each pool gets its own
        env.pop(METRICS_DIR_ENV, None)
        if self.opts.flower and not self.opts.flower_open:
            configured = self.settings.flower_basic_auth
            self.flower_auth = (
                configured.get_secret_value() if configured else f"admin:{secrets.token_urlsafe(12)}"
            )
            env["MEMBRANE_FLOWER_BASIC_AUTH"] = self.flower_auth
        return env

    def plan(self) -> list[Child]:
        """The argv of every child (API, workers, beat, Flower), from the workers package."""
        from workers import app as celery_app  # the argv of each pool is the pipeline's to define

        o = self.opts
        kids = [
            Child(
                "api",
                [sys.executable, "-m", "api", "--host", o.host, "--port", str(o.api_port)],
                self.logs / "api.log",
                url=self.api_url,
                env={**self._console_env(), "MEMBRANE_DATABASE_ROLE": "api"},
            )
        ]
        metrics = self.worker_metrics_ports()
        for q in o.queues:
            kids.append(
                Child(
                    f"worker-{q}",
                    celery_app.worker_argv(q, concurrency=o.concurrency.get(q)),
                    self.logs / f"worker-{q}.log",
                    # RFC 9.5: SIGTERM is the pool's soft shutdown
                    env={
                        **celery_app.WORKER_ENV,
                        **(self._metrics_env(f"worker-{q}", metrics[q]) if q in metrics else {}),
                        # RFC 10.5: the sweeps' statements run longer than a batch's
                        "MEMBRANE_DATABASE_ROLE": ROLES.get(q, "pool"),
                    },
                )
            )
        if o.beat:
            kids.append(
                Child(
                    "beat",
                    celery_app.beat_argv(str(o.data_dir / "celerybeat-schedule")),
                    self.logs / "beat.log",
                )
            )
        if o.flower:
            kids.append(
                Child(
                    "flower",
                    celery_app.flower_argv(
                        self.settings, address=o.host, port=o.flower_port, open_access=o.flower_open
                    ),
                    self.logs / "flower.log",
                    url=f"{self.listen.scheme}://{o.host}:{o.flower_port}",
                )
            )
        return kids

    def _console_env(self) -> dict[str, str]:
        """RFC 10.8: the console links to this stack's Flower and to its pools' ``/metrics``,
        unless the settings name others."""
        o, s = self.opts, self.settings
        env: dict[str, str] = {}
        if o.flower and not s.flower_url:
            env["MEMBRANE_FLOWER_URL"] = f"{self.listen.scheme}://{o.host}:{o.flower_port}"
        pools = self.worker_metrics_ports()
        if pools and not s.prometheus_targets:
            env["MEMBRANE_PROMETHEUS_TARGETS"] = json.dumps(
                [f"http://127.0.0.1:{port}/metrics" for port in pools.values()]
            )
        return env

    def worker_metrics_ports(self) -> dict[str, int]:
        """RFC 14.2: the loopback port of each pool's ``/metrics``, by queue (none without one)."""
        base = self.opts.worker_metrics_port
        if base is None:
            return {}
        return {q: base + i for i, q in enumerate(self.opts.queues)}

    def _metrics_env(self, name: str, port: int) -> dict[str, str]:
        return {
            "MEMBRANE_WORKER_METRICS_HOST": "127.0.0.1",
            "MEMBRANE_WORKER_METRICS_PORT": str(port),
            METRICS_DIR_ENV: str(self.opts.data_dir / "metrics" / name),
        }

    def start(self, wait_ready: float = 120.0) -> None:
        """Start everything; returns once the API answers ``/readyz``.

        The listen rules (:meth:`preflight`) are checked first, so a refused address
        starts nothing.
        """
        self.preflight()
        self.logs.mkdir(parents=True, exist_ok=True)
        try:
            self.start_database()
            self.start_redis()
            for port, what in ((self.opts.api_port, "API"), (self.opts.flower_port, "Flower")):
                if (what == "API" or self.opts.flower) and port_open(self.opts.host, port):
                    raise StackError(f"port {port} for the {what} is already in use")
            env = self.env()
            for child in self.plan():
                if METRICS_DIR_ENV in child.env:  # RFC 14.2: the totals start at this start
                    shutil.rmtree(child.env[METRICS_DIR_ENV], ignore_errors=True)
                    Path(child.env[METRICS_DIR_ENV]).mkdir(parents=True)
                child.proc = self._spawn(child.name, child.argv, {**env, **child.env})
                self.children.append(child)
            self.wait_ready(wait_ready)
        except BaseException:
            self.stop()
            raise

    def wait_ready(self, timeout: float) -> None:
        """Poll the API's ``/readyz`` until it answers 200."""
        # A wildcard address is probed on loopback; the probe carries no credentials, so
        # it need not verify the (possibly self-signed) certificate of its own child.
        host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(self.opts.host, self.opts.host)
        host = f"[{host}]" if ":" in host and not host.startswith("[") else host
        url = f"{self.listen.scheme}://{host}:{self.opts.api_port}/readyz"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = self.dead()
            if dead:
                status = exit_status(dead.proc.returncode) if dead.proc else "?"
                raise StackError(f"{dead.name} exited during start-up ({status}):\n{self.tail(dead)}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=2, verify=False).status_code == 200:
                    return
            time.sleep(0.25)
        raise StackError(f"the API was not ready after {timeout:.0f}s; see {self.logs / 'api.log'}")

    # -- watch and stop -----------------------------------------------------------

    def watch(self) -> Watch:
        """RFC 13.1: one look at the embedded Postgres and every child; what to print, whether to stop.

        An embedded Postgres that crashed is started again on its socket
        (:meth:`_restart_postgres`); one shut down cleanly stops the stack. A restartable
        child (the private redis-server) that died is started again with the same argv, at
        most ``restart_limit`` times within ``restart_window`` seconds; any other child that
        exited stops the stack. Every death and restart is written to the supervisor log.
        """
        look = Watch()
        gone = self.postgres_gone()
        if gone:
            events, halt = self._restart_postgres(gone)
            look.events += events
            if halt:
                look.stop = halt
                return look
        stopped: list[str] = []
        for child in self.children:
            if child.proc is None or child.proc.poll() is None:
                continue
            status = exit_status(child.proc.returncode)
            if child.restart:
                event, stop = self._restart(child, status)
                self.note(event)
                if stop:
                    stopped.append(event)
                else:
                    look.events.append(event)
            else:
                message = (
                    f"{child.name} (pid {child.proc.pid}) exited ({status}); stopping the "
                    f"stack. Last lines of {child.log}:\n{self.tail(child)}"
                )
                self.note(message)
                stopped.append(message)
        if stopped:
            look.stop = "\n".join(stopped)
        return look

    def _restart(self, child: Child, status: str) -> tuple[str, bool]:
        """Start ``child`` again within its budget; the event and whether the stack must stop."""
        window, limit = self.opts.restart_window, self.opts.restart_limit
        pid = child.proc.pid if child.proc else "?"
        if not spend_restart(child.restarts, time.monotonic(), limit, window):
            return (
                f"{child.name} (pid {pid}) exited ({status}) after {len(child.restarts)} restarts "
                f"within {window:g} s (at most {limit}); stopping the stack. See {child.log}",
                True,
            )
        try:
            self._launch(child)
        except StackError as exc:
            return f"{child.name} (pid {pid}) exited ({status}) and could not be restarted: {exc}", True
        new_pid = child.proc.pid if child.proc else "?"
        where = f" on port {child.port}" if child.port else ""
        return (
            f"{child.name} (pid {pid}) exited ({status}); restarted{where} as pid {new_pid} "
            f"(restart {len(child.restarts)} of at most {limit} within {window:g} s)",
            False,
        )

    def _restart_postgres(self, gone: str) -> tuple[list[str], str | None]:
        """RFC 13.1: start the embedded Postgres that is ``gone`` again, within its budget.

        Returns the events to print and why the stack must stop (``None`` once it runs
        again). A clean shutdown (``membrane db stop``) is an operator's and stops the
        stack; a crash, an immediate stop or a killed postmaster is restarted on the same
        data folder, socket and port, crash recovery first, at most
        ``postgres_restart_limit`` times within ``postgres_restart_window`` seconds. The
        children are not restarted: they answer 503 or retry until it is back (RFC 10.5).
        """
        o, data_dir, log = self.opts, self.opts.data_dir, self.postgres_log
        with contextlib.suppress(subprocess.SubprocessError, OSError):  # unreadable: try a start
            if embedded.shut_down_cleanly(data_dir):
                stop = (
                    f"the embedded Postgres was shut down ({gone}); stopping the stack. Postgres log: {log}"
                )
                self.note(stop)
                return [], stop
        limit, window = o.postgres_restart_limit, o.postgres_restart_window
        restarts = self.postgres_restarts
        if not spend_restart(restarts, time.monotonic(), limit, window):
            stop = (
                f"the embedded Postgres stopped ({gone}) after {len(restarts)} restarts within "
                f"{window:g} s (at most {limit}); stopping the stack. Postgres log: {log}"
            )
            self.note(stop)
            return [], stop
        at = self.postmaster or embedded.Postmaster(pid=0, socket_dir=None, port=None)
        socket = f"socket {at.socket_dir or self.pgdata} (port {at.port or 5432})"
        died = f"the embedded Postgres stopped ({gone}); starting it again on {socket}"
        self.note(died)  # recovery may take a while: the death is in the log meanwhile
        t0 = time.monotonic()
        try:
            self.postmaster = embedded.start_again(data_dir, at, o.postgres_start_timeout)
        except (subprocess.SubprocessError, OSError) as exc:
            if isinstance(exc, subprocess.CalledProcessError):  # its text is the whole command line
                why = f"pg_ctl start: exit status {exc.returncode}"
            else:
                why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            stop = (
                f"the embedded Postgres stopped ({gone}) and did not accept connections within "
                f"{o.postgres_start_timeout:g} s of a restart ({why}); stopping the stack. "
                f"Postgres log: {log}"
            )
            self.note(stop)
            return [died], stop
        back = (
            f"the embedded Postgres restarted on {socket} as pid {self.postmaster.pid}, accepting "
            f"connections after {time.monotonic() - t0:.1f} s (restart {len(restarts)} of at most "
            f"{limit} within {window:g} s). Postgres log: {log}"
        )
        self.note(back)
        return [died, back], None

    def postgres_gone(self) -> str | None:
        """Why the embedded Postgres is not running, or ``None`` (not embedded, or running).

        Cheap enough for every look: its ``postmaster.pid`` must exist and name a live
        process (``pg_ctl stop`` removes the file; a killed postmaster leaves it stale).
        """
        if not self.embedded:
            return None
        pidfile = self.pgdata / "postmaster.pid"
        try:
            first = pidfile.read_text().split("\n", 1)[0].strip()
        except FileNotFoundError:
            return f"{pidfile} is gone"
        except OSError:
            return None  # unreadable for a moment is not gone
        if not first.isdigit():
            return None  # being written by a starting server
        if not pid_alive(int(first)):
            return f"its postmaster, pid {first}, is not running"
        return None

    def note(self, message: str) -> None:
        """Append ``message`` to the supervisor log with a UTC timestamp."""
        self.logs.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
        with self.supervisor_log.open("a", encoding="utf-8") as f:
            f.write(f"{stamp} {message}\n")

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
        procs = [c.proc for c in reversed(self.children) if c.proc]
        if procs:
            self.note("stopping " + ", ".join(c.name for c in reversed(self.children)))
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
        if self.standby is not None and self.opts.stop_database:
            self.standby.stop()
            self.standby = None
        if self.embedded and self.opts.stop_database:
            with contextlib.suppress(Exception):
                embedded.stop(self.opts.data_dir)
            self.embedded = False

    def _spawn(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        # Own session = own process group: the terminal's Ctrl-C reaches only the supervisor.
        self.logs.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.logs / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            os.close(fd)
        self.note(f"started {name} (pid {proc.pid})")
        return proc


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
