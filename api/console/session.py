"""The console's session: an AES-GCM-sealed cookie, its CSRF token and who it speaks for (RFC 10.8).

The cookie holds ``{digest, expires, csrf}``: the digest of the key that signed in (none
without keys), never the key. Every request re-reads the key's policy from the key ring by
that digest, so a removed or expired key ends its sessions at once; the server keeps no
session state, so every API process of a host (one sealing key, ``console.secret``) accepts
the cookie of another.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from starlette.requests import Request
from starlette.responses import Response

from api import access
from api.deps import Services, services, trust
from membrane_core import Settings, errors
from membrane_core.enums import Sensitivity
from membrane_core.trust import TrustPolicy

#: The cookie's name; it is sent only to the console's paths.
COOKIE = "membrane_console"
PATH = "/console"
#: The sealing key's file under ``MEMBRANE_DATA_DIR`` when ``MEMBRANE_CONSOLE_SECRET`` is unset.
SECRET_FILE = "console.secret"
#: Bound to every sealed cookie, so that no other AES-GCM value of this key passes for one.
_AAD = b"membrane-console-session-v1"
#: The policy of a visitor who has not signed in while keys are configured: it reads and writes
#: nothing, so a page that forgets to require a sign-in still shows nothing (RFC 10.8).
SIGNED_OUT = TrustPolicy(
    read_scopes=frozenset(), write_scopes=frozenset(), max_sensitivity=Sensitivity.PUBLIC, actor="signed-out"
)
_NONCE = 12


class SignInRequired(errors.Unauthorized):
    """Sign in with an API key to use the console."""


class CsrfRefused(errors.Forbidden):
    """This change did not come from the console's own page (CSRF check failed); reload it."""


@dataclass(frozen=True)
class Session:
    """What the cookie holds (RFC 10.8)."""

    #: SHA-256 of the key that signed in; None before sign-in and without keys
    digest: str | None
    #: Unix time after which the cookie is refused
    expires: float
    #: the token every change must carry in its ``csrf`` field
    csrf: str


def new_session(digest: str | None, seconds: int) -> Session:
    """A fresh session with its own CSRF token (a new one at every sign-in: no fixation)."""
    return Session(digest=digest, expires=time.time() + seconds, csrf=secrets.token_urlsafe(32))


class Seal:
    """Seals and opens session cookies under one 32-byte key (AES-GCM, RFC 10.8)."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the console's sealing key must be 32 bytes")
        self._aead = AESGCM(key)

    def seal(self, session: Session) -> str:
        """The cookie value of ``session``."""
        nonce = os.urandom(_NONCE)
        body = json.dumps({"d": session.digest, "e": session.expires, "c": session.csrf}).encode()
        return base64.urlsafe_b64encode(nonce + self._aead.encrypt(nonce, body, _AAD)).decode()

    def open(self, value: str | None, now: float | None = None) -> Session | None:
        """The session in a cookie value; None when absent, forged, damaged or expired."""
        if not value:
            return None
        try:
            raw = base64.urlsafe_b64decode(value.encode())
            body = json.loads(self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], _AAD))
            session = Session(digest=body["d"], expires=float(body["e"]), csrf=str(body["c"]))
        except (InvalidTag, ValueError, KeyError, TypeError, binascii.Error):
            return None
        if session.expires <= (time.time() if now is None else now):
            return None
        return session


def sealing_key(settings: Settings) -> bytes:
    """RFC 10.8: ``MEMBRANE_CONSOLE_SECRET`` (any string, hashed to 32 bytes), else 32 random
    bytes in ``data_dir/console.secret`` (mode 0600), created once and then read by every API
    process of the host."""
    if settings.console_secret is not None:
        return hashlib.sha256(settings.console_secret.get_secret_value().encode()).digest()
    path = Path(settings.data_dir) / SECRET_FILE
    try:
        return _read_secret(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written aside and linked into place: a concurrent process either links first (and
    # this one reads its key) or reads a complete file, never a half-written one.
    tmp = path.with_name(f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)
    return _read_secret(path)


def _read_secret(path: Path) -> bytes:
    key = path.read_bytes()
    if len(key) != 32:
        raise errors.MembraneError(f"{path} must hold 32 bytes; delete it to make a new one")
    return key


@dataclass(frozen=True)
class ConsoleConfig:
    """What the console reads from settings once per process (RFC 10.8)."""

    seal: Seal
    session_seconds: int
    flower_url: str | None
    prometheus_targets: tuple[str, ...]


_config_lock = threading.Lock()


def config(request: Request, svc: Services) -> ConsoleConfig:
    """The process's console configuration, built on first use from the served settings."""
    state = request.app.state
    built: ConsoleConfig | None = getattr(state, "console", None)
    if built is not None:
        return built
    with _config_lock:
        built = getattr(state, "console", None)
        if built is None:
            s = svc.membrane.settings
            built = ConsoleConfig(
                seal=Seal(sealing_key(s)),
                session_seconds=s.console_session_seconds,
                flower_url=s.flower_url or None,
                prometheus_targets=tuple(s.prometheus_targets),
            )
            state.console = built
    return built


@dataclass(frozen=True)
class Viewer:
    """Who a console request speaks for: the policy re-read from the key ring, the session
    and, when the request started a session, the cookie to set."""

    svc: Services
    policy: TrustPolicy
    session: Session
    signed_in: bool
    keys_enabled: bool
    config: ConsoleConfig
    #: a new session the answer must set (first visit, or a replaced cookie)
    issue: bool = False
    #: the cookie named a key that no longer signs in (removed, or expired)
    ended: bool = False

    @property
    def csrf(self) -> str:
        """The token the page's forms carry."""
        return self.session.csrf


async def visitor(request: Request) -> Viewer:
    """Any console page's caller, signed in or not; issues a session (with its CSRF token) on
    the first visit. Without keys the caller is the development policy, on loopback only: the
    rule of :func:`api.deps.trust`, which this reuses."""
    svc = await services(request)
    cfg = config(request, svc)
    svc.keys.refresh()  # RFC 10.3: a changed key file is re-read, at most once a second
    session = cfg.seal.open(request.cookies.get(COOKIE))
    if not svc.keys.enabled:
        policy = await trust(request, None)  # RFC 7.5: 403 off loopback without keys
        if session is None:
            return Viewer(svc, policy, new_session(None, cfg.session_seconds), True, False, cfg, issue=True)
        return Viewer(svc, policy, session, True, False, cfg)
    ended = False
    if session is not None and session.digest is not None:
        try:
            policy = svc.keys.policy_of(session.digest)
        except errors.Unauthorized:
            session, ended = None, True  # the key was removed or has expired: the session ends now
        else:
            access.identify(policy.actor)
            return Viewer(svc, policy, session, True, True, cfg)
    if session is None:
        fresh = new_session(None, cfg.session_seconds)
        return Viewer(svc, SIGNED_OUT, fresh, False, True, cfg, issue=True, ended=ended)
    return Viewer(svc, SIGNED_OUT, session, False, True, cfg)


async def viewer(request: Request) -> Viewer:
    """A console page's caller, who must be signed in when keys are configured (RFC 10.8)."""
    found = await visitor(request)
    if found.ended:
        raise errors.Unauthorized("the session ended: its key was removed or has expired")
    if not found.signed_in:
        raise SignInRequired()
    return found


def signed_in(found: Viewer, digest: str) -> Viewer:
    """The viewer after a sign-in: a new session (and CSRF token) for the key's digest."""
    policy = found.svc.keys.policy_of(digest)
    session = new_session(digest, found.config.session_seconds)
    return replace(found, policy=policy, session=session, signed_in=True, issue=True)


def set_cookie(response: Response, request: Request, found: Viewer) -> None:
    """Set the session cookie: HttpOnly, SameSite=Strict, the console's path only, Secure under
    TLS (RFC 10.8)."""
    response.set_cookie(
        COOKIE,
        found.config.seal.seal(found.session),
        max_age=max(1, int(found.session.expires - time.time())),
        path=PATH,
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )


def clear_cookie(response: Response, request: Request) -> None:
    """End the session in the browser (sign-out, or a key that no longer signs in)."""
    response.delete_cookie(
        COOKIE, path=PATH, secure=request.url.scheme == "https", httponly=True, samesite="strict"
    )


def check_csrf(request: Request, found: Viewer, token: str | None) -> None:
    """RFC 10.8: a change must come from the console's own page: its ``Origin`` (else its
    ``Referer``) names this host, and its ``csrf`` field equals the session's token."""
    expected = f"{request.url.scheme}://{request.headers.get('host', '')}"
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        referer = request.headers.get("referer")
        if referer:
            parts = urlsplit(referer)
            origin = f"{parts.scheme}://{parts.netloc}"
    if origin is None or not hmac.compare_digest(origin.encode(), expected.encode()):
        raise CsrfRefused("this change did not come from the console's own page (Origin check failed)")
    if not token or not hmac.compare_digest(token.encode(), found.csrf.encode()):
        raise CsrfRefused("this form has expired or did not come from the console (CSRF token); reload it")
