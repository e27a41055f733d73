"""Encryption at rest of sensitive records: the key ring, sealing and blind indexes (RFC 7.6).

A record at or above the configured level is *sealed* before it reaches Postgres: its
payload, summary, metadata and tags are one AES-256-GCM ciphertext that names the key it
was sealed under, bound to the record's id. The keys that seal records rotate (a ring of
keys by id, one of them current for new writes); the *index key* is long-lived: it keys
the HMACs that stand in for a sealed record's fact key and tags (blind indexes, compared
for equality) and seals the rationales of the append-only audit log, which no rotation
can rewrite. Pure, no I/O: :mod:`membrane_core.storage` lays the sealed rows out.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from membrane_core import errors
from membrane_core.enums import Sensitivity

__all__ = [
    "INDEX_KEY_ID",
    "NO_KEYS",
    "SEALED_BODY",
    "KeyRing",
    "Sealer",
    "is_blind",
    "key_of",
    "ring_from_config",
]

#: Envelope version: the first byte of every ciphertext.
VERSION = 1
#: RFC 7.6: a data key is 32 bytes (AES-256-GCM).
KEY_BYTES = 32
_NONCE_BYTES = 12
#: The id the envelope of an audit rationale names: it is sealed under the index key.
INDEX_KEY_ID = "@index"
#: A key id: what the envelope and ``record_payloads.key_id`` store.
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
#: Prefix of a blind index value; the rest is 22 base64url characters (132 bits).
BLIND_PREFIX = "hmac:"
_BLIND_CHARS = 22
_SEP = b"\x1f"
#: The one key of a sealed inbox body (RFC 9.1); no request has a key of that spelling.
SEALED_BODY = "$sealed"


def is_blind(value: str) -> bool:
    """Whether a stored key term or tag is a blind index value (RFC 7.6)."""
    return value.startswith(BLIND_PREFIX)


def _key(text: str, name: str) -> bytes:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{name} is not base64") from None
    if len(raw) != KEY_BYTES:
        raise ValueError(f"{name} must be {KEY_BYTES} bytes in base64, got {len(raw)} bytes")
    return raw


@dataclass(frozen=True)
class KeyRing:
    """The data keys by id, the id new writes use, and the index key (RFC 7.6)."""

    keys: Mapping[str, bytes] = field(repr=False)
    current: str
    index: bytes = field(repr=False)


def ring_from_config(keys_json: str | None, key_id: str | None, index_key: str | None) -> KeyRing | None:
    """RFC 7.6: the ring of ``MEMBRANE_ENCRYPTION_KEYS`` (a JSON object of key id to base64 of
    32 bytes), ``MEMBRANE_ENCRYPTION_KEY_ID`` (the key of new writes; may be omitted with one
    key) and ``MEMBRANE_ENCRYPTION_INDEX_KEY``; ``None`` (encryption off) without keys.

    Raises ``ValueError`` naming the setting at fault, never a key.
    """
    if not (keys_json or "").strip():
        if (key_id or "").strip() or (index_key or "").strip():
            raise ValueError(
                "MEMBRANE_ENCRYPTION_KEY_ID and MEMBRANE_ENCRYPTION_INDEX_KEY need MEMBRANE_ENCRYPTION_KEYS"
            )
        return None
    try:
        raw = json.loads(keys_json or "")
    except json.JSONDecodeError:
        raise ValueError("MEMBRANE_ENCRYPTION_KEYS is not JSON") from None
    if not isinstance(raw, dict) or not raw:
        raise ValueError('MEMBRANE_ENCRYPTION_KEYS must be a non-empty JSON object {"<key id>": "<base64>"}')
    keys: dict[str, bytes] = {}
    for kid, value in raw.items():
        if not _KEY_ID.fullmatch(kid):
            raise ValueError(f"MEMBRANE_ENCRYPTION_KEYS: key id {kid!r} is not 1-64 of A-Z a-z 0-9 . _ -")
        if not isinstance(value, str):
            raise ValueError(f"MEMBRANE_ENCRYPTION_KEYS: key {kid!r} is not a base64 string")
        keys[kid] = _key(value, f"MEMBRANE_ENCRYPTION_KEYS: key {kid!r}")
    current = (key_id or "").strip()
    if not current:
        if len(keys) > 1:
            raise ValueError(
                "MEMBRANE_ENCRYPTION_KEY_ID must name the key of new writes (the ring has several)"
            )
        current = next(iter(keys))
    if current not in keys:
        raise ValueError(f"MEMBRANE_ENCRYPTION_KEY_ID {current!r} is not in MEMBRANE_ENCRYPTION_KEYS")
    if not (index_key or "").strip():
        raise ValueError("MEMBRANE_ENCRYPTION_INDEX_KEY (base64 of 32 bytes) must be set with the keys")
    return KeyRing(keys, current, _key(index_key or "", "MEMBRANE_ENCRYPTION_INDEX_KEY"))


def _subkey(index: bytes, purpose: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=purpose).derive(index)


def _header(key_id: str) -> bytes:
    kid = key_id.encode()
    return bytes([VERSION, len(kid)]) + kid


class Sealer:
    """Seals and opens records, their audit rationales and inbox bodies (RFC 7.6).

    Without a ring (:data:`NO_KEYS`) nothing is sealed, and opening a sealed value raises
    :class:`~membrane_core.errors.EncryptionKeyUnavailable` naming its key.
    """

    def __init__(self, ring: KeyRing | None, *, at_or_above: Sensitivity = Sensitivity.HIGH) -> None:
        self._ring = ring
        self.at_or_above = at_or_above
        self._aead: dict[str, AESGCM] = {}
        self._blind = hmac.new(b"", digestmod=hashlib.sha256)
        if ring is not None:
            self._aead = {kid: AESGCM(key) for kid, key in ring.keys.items()}
            self._aead[INDEX_KEY_ID] = AESGCM(_subkey(ring.index, b"membrane audit rationale"))
            self._blind = hmac.new(_subkey(ring.index, b"membrane blind index"), digestmod=hashlib.sha256)

    @property
    def enabled(self) -> bool:
        """Whether keys are configured: records at or above :attr:`at_or_above` are sealed."""
        return self._ring is not None

    @property
    def current_key(self) -> str | None:
        """The id of the key new writes are sealed under."""
        return self._ring.current if self._ring else None

    def seals(self, sensitivity: Sensitivity | str | int) -> bool:
        """RFC 7.6: whether a record at ``sensitivity`` (a level or its rank) is sealed."""
        if self._ring is None:
            return False
        rank = sensitivity if isinstance(sensitivity, int) else Sensitivity(sensitivity).rank
        return rank >= self.at_or_above.rank

    # -- ciphertexts -------------------------------------------------------------------

    def seal_text(self, bound_to: uuid.UUID, plaintext: str, *, key_id: str | None = None) -> bytes:
        """RFC 7.6: ``plaintext`` sealed under the current key (or ``key_id``), bound to the id
        of what it belongs to (a record, an operation): its envelope names the key."""
        kid = key_id or self.current_key
        aead = self._aead.get(kid or "")
        if kid is None or aead is None:
            raise errors.EncryptionKeyUnavailable(f"no encryption key {kid!r} to seal with")
        header = _header(kid)
        nonce = os.urandom(_NONCE_BYTES)
        return header + nonce + aead.encrypt(nonce, plaintext.encode(), header + bound_to.bytes)

    def open_text(self, bound_to: uuid.UUID, blob: bytes) -> str:
        """The plaintext of a :meth:`seal_text` envelope; ``EncryptionKeyUnavailable`` naming its
        key when the ring lacks it or it does not open the envelope."""
        kid = key_of(blob)
        aead = self._aead.get(kid)
        if aead is None:
            raise errors.EncryptionKeyUnavailable(
                f"{bound_to} is sealed under encryption key {kid!r}, which the key ring does not hold",
                details=[{"field": "key_id", "message": kid, "type": "encryption_key_unavailable"}],
            )
        header_len = 2 + blob[1]
        nonce = blob[header_len : header_len + _NONCE_BYTES]
        try:
            plain = aead.decrypt(nonce, blob[header_len + _NONCE_BYTES :], blob[:header_len] + bound_to.bytes)
        except InvalidTag:
            raise errors.EncryptionKeyUnavailable(
                f"encryption key {kid!r} does not open {bound_to}: the ring holds a wrong key of that id",
                details=[{"field": "key_id", "message": kid, "type": "encryption_key_unavailable"}],
            ) from None
        return plain.decode()

    def seal_content(self, record_id: uuid.UUID, content_json: str) -> tuple[str, bytes]:
        """RFC 7.6: a record's sealed part (the JSON of payload, summary, metadata and tags)
        as ``(key id, ciphertext)``."""
        kid = self.current_key
        assert kid is not None, "sealing needs a key ring"
        return kid, self.seal_text(record_id, content_json, key_id=kid)

    def open_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """A hydrated row (``record_fields``) with its sealed part opened; a plain row as it is."""
        sealed = row.get("sealed")
        if sealed is None:
            return row
        content = json.loads(self.open_text(row["id"], bytes(sealed)))
        return {**row, **content, "sealed": None}

    # -- inbox bodies ------------------------------------------------------------------------

    def seal_json(self, bound_to: uuid.UUID, text: str) -> str:
        """RFC 7.6, 9.1: a request's JSON text as the JSON object the inbox stores sealed."""
        blob = self.seal_text(bound_to, text)
        return json.dumps({SEALED_BODY: base64.b64encode(blob).decode()})

    def open_json(self, bound_to: uuid.UUID, text: str) -> str:
        """The JSON text of a request the inbox stored (sealed by :meth:`seal_json`, or plain)."""
        if not text.startswith('{"' + SEALED_BODY + '"'):
            return text
        return self.open_text(bound_to, base64.b64decode(json.loads(text)[SEALED_BODY]))

    # -- audit rationales (sealed under the index key: the log is append-only) -------------

    def seal_note(self, record_id: uuid.UUID, text: str) -> str:
        """RFC 7.6, 5.5: an audit rationale of a sealed record, sealed under the index key."""
        return base64.b64encode(self.seal_text(record_id, text, key_id=INDEX_KEY_ID)).decode()

    def open_note(self, record_id: uuid.UUID, note: str) -> str:
        """The rationale :meth:`seal_note` sealed."""
        return self.open_text(record_id, base64.b64decode(note))

    # -- blind indexes --------------------------------------------------------------------

    def blind(self, domain: str, *parts: str) -> str:
        """RFC 7.6: the HMAC standing in for a term: equal inputs give equal values."""
        assert self._ring is not None, "blind indexes need a key ring"
        mac = self._blind.copy()  # the keyed state, set up once
        mac.update(_SEP.join(p.encode() for p in (domain, *parts)))
        digest = mac.digest()
        return BLIND_PREFIX + base64.urlsafe_b64encode(digest).decode()[:_BLIND_CHARS]

    def blind_terms(self, scope: str, terms: tuple[str, str, str]) -> tuple[str, str, str]:
        """RFC 7.6: a normalised fact key's terms as blind values (terms already blind are kept)."""
        s, p, o = (t if is_blind(t) else self.blind("fact", scope, t) for t in terms)
        return (s, p, o)

    def blind_tag(self, tag: str) -> str:
        """RFC 7.6: the blind value of a sealed record's tag."""
        return self.blind("tag", tag)

    def tag_forms(self, tags: list[str]) -> list[str]:
        """What a tag filter matches: each tag as given and, with keys, as a sealed record's."""
        if self._ring is None:
            return tags
        return [*tags, *(self.blind_tag(t) for t in tags)]


def key_of(blob: bytes) -> str:
    """The key id a ciphertext names (RFC 7.6)."""
    if len(blob) < 2 or blob[0] != VERSION or len(blob) < 2 + blob[1] + _NONCE_BYTES:
        raise errors.EncryptionKeyUnavailable("a sealed value has no envelope this version reads")
    return blob[2 : 2 + blob[1]].decode()


#: RFC 7.6: encryption off: nothing is sealed, and a sealed value cannot be opened.
NO_KEYS = Sealer(None)
