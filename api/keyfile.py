"""The key ring from ``MEMBRANE_API_KEYS`` or the file ``MEMBRANE_API_KEYS_FILE`` (RFC 10.3).

The file is read at start-up, where a file that does not load refuses the start, and again
in every API process when it changed (its modification time, size or inode; looked at most
once a second, on the request path) or on SIGHUP.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from api.auth import KeyRing, parse_keys
from api.ratelimit import RateLimits
from membrane_core import Settings, errors

log = logging.getLogger(__name__)

#: RFC 10.3: the key file is looked at (one ``stat``) at most this often per process.
CHECK_EVERY_SECONDS = 1.0


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class KeyFile:
    """RFC 10.3: a JSON key file and whether it changed since it was last read."""

    def __init__(
        self, path: Path, *, every: float = CHECK_EVERY_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.path = path
        self.every = every
        self._clock = clock
        self._seen: tuple[int, int, int] | None = None
        self._next_check = 0.0

    def read(self) -> dict[str, dict[str, Any]]:
        """The keys in the file; ``ValueError`` naming the problem when it cannot be used.

        What is read is remembered as seen, loaded or not, so a broken file is reported once
        per change rather than at every check.
        """
        self._seen = _signature(self.path)
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot be read: {exc}") from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            raise ValueError('must be a JSON object {"<key>": {<policy>}, ...}')
        return data

    def changed(self) -> bool:
        """Whether the file changed since it was read; looks at most once every ``every`` seconds."""
        now = self._clock()
        if now < self._next_check:
            return False
        self._next_check = now + self.every
        return _signature(self.path) != self._seen


def keys_file(settings: Settings) -> Path | None:
    """``MEMBRANE_API_KEYS_FILE``, or None when unset (an empty variable arrives as ``.``)."""
    path = settings.api_keys_file
    return None if path is None or str(path) in {"", "."} else path


def default_limits(settings: Settings) -> RateLimits:
    """RFC 10.6: the limits of a key whose entry sets none."""
    return RateLimits(
        requests_per_second=settings.rate_requests_per_second,
        captures_per_second=settings.rate_captures_per_second,
        burst=settings.rate_burst,
    )


def configured_keys(settings: Settings, source: KeyFile | None = None) -> dict[str, dict[str, Any]]:
    """RFC 10.3: the configured keys, checked; ``InvalidInput`` naming the problem otherwise.

    From the file when ``MEMBRANE_API_KEYS_FILE`` is set (read through ``source`` if given),
    else ``MEMBRANE_API_KEYS``; both set is refused, so that no key outlives its removal
    from the one that is read.
    """
    path = keys_file(settings)
    if path is None:
        keys = settings.api_keys
        where = "MEMBRANE_API_KEYS"
    elif settings.api_keys:
        raise errors.InvalidInput(
            "MEMBRANE_API_KEYS and MEMBRANE_API_KEYS_FILE are both set: set one of them",
            details=[{"field": "MEMBRANE_API_KEYS_FILE", "message": "both set", "type": "conflict"}],
        )
    else:
        where = f"MEMBRANE_API_KEYS_FILE={path}"
        try:
            keys = (source or KeyFile(path)).read()
        except ValueError as exc:
            raise _refused(where, exc) from exc
    try:
        parse_keys(keys, default_limits(settings))
    except ValueError as exc:
        raise _refused(where, exc) from exc
    return keys


def _refused(where: str, exc: ValueError) -> errors.InvalidInput:
    return errors.InvalidInput(
        f"{where}: {exc}",
        details=[{"field": where.partition("=")[0], "message": str(exc), "type": "value_error"}],
    )


def key_ring(settings: Settings) -> KeyRing:
    """RFC 10.3, 10.6: the process's key ring, following the key file when one is set."""
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
    path = keys_file(settings)
    # the source remembers what it read: the next change of the file is the next reload
    source = KeyFile(path) if path is not None else None
    keys = configured_keys(settings, source)
    return KeyRing(keys, metrics_token=token, limits=default_limits(settings), source=source)


def reload_on_sighup(ring: KeyRing) -> Callable[[], None]:
    """RFC 10.3: SIGHUP re-reads the key file; returns what uninstalls the handler.

    Installed on the running event loop, so the reload runs on the loop, not inside a
    signal handler. Without a key file SIGHUP keeps its default. Where signals cannot be
    handled (a server in a thread other than the main one, a platform without SIGHUP) the
    file is still followed by its changes.
    """
    loop = asyncio.get_running_loop()
    hup = getattr(signal, "SIGHUP", None)
    if hup is None or not ring.follows_file:
        return lambda: None
    try:
        loop.add_signal_handler(hup, ring.reload)
    except (NotImplementedError, RuntimeError, ValueError):
        log.debug("SIGHUP is not handled here (not the main thread); the key file is followed by its changes")
        return lambda: None

    def uninstall() -> None:
        loop.remove_signal_handler(hup)

    return uninstall
