"""The key ring and sealing (RFC 7.6): envelopes name their key, bind their owner, open once."""

from __future__ import annotations

import base64
import json
import os
import uuid

import pytest
from pydantic import SecretStr, ValidationError

from membrane_core import Settings, errors
from membrane_core.enums import Sensitivity
from membrane_core.sealing import NO_KEYS, Sealer, key_of, ring_from_config


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


INDEX = _key()


def sealer(keys: dict[str, str], current: str | None = None) -> Sealer:
    return Sealer(ring_from_config(json.dumps(keys), current, INDEX))


def test_a_sealed_text_names_its_key_and_opens_only_for_its_owner() -> None:
    s = sealer({"k1": _key()})
    owner = uuid.uuid4()
    blob = s.seal_text(owner, "the secret")
    assert key_of(blob) == "k1" and b"the secret" not in blob
    assert s.open_text(owner, blob) == "the secret"
    with pytest.raises(errors.EncryptionKeyUnavailable, match="'k1'"):
        s.open_text(uuid.uuid4(), blob)  # moved to another record: it does not open
    assert s.seal_text(owner, "the secret") != blob  # a fresh nonce each time


def test_an_old_key_still_opens_and_a_missing_or_wrong_one_is_named() -> None:
    k1, k2 = _key(), _key()
    owner = uuid.uuid4()
    blob = sealer({"k1": k1}).seal_text(owner, "x")
    assert sealer({"k1": k1, "k2": k2}, "k2").open_text(owner, blob) == "x"
    with pytest.raises(errors.EncryptionKeyUnavailable, match=r"'k1'.*does not hold"):
        sealer({"k2": k2}).open_text(owner, blob)
    with pytest.raises(errors.EncryptionKeyUnavailable, match=r"'k1'.*wrong key"):
        sealer({"k1": k2}).open_text(owner, blob)
    with pytest.raises(errors.EncryptionKeyUnavailable, match="'k1'"):
        NO_KEYS.open_text(owner, blob)


def test_the_level_decides_what_is_sealed() -> None:
    s = Sealer(ring_from_config(json.dumps({"k": _key()}), None, INDEX), at_or_above=Sensitivity.MEDIUM)
    assert [s.seals(level) for level in Sensitivity] == [False, False, True, True, True]
    assert not any(NO_KEYS.seals(level) for level in Sensitivity)


def test_blind_values_are_keyed_deterministic_and_scoped() -> None:
    a, b = sealer({"k1": _key()}), sealer({"k2": _key()})
    assert a.blind_terms("s", ("x", "y", "z")) == b.blind_terms("s", ("x", "y", "z"))  # the index key
    assert a.blind_terms("s", ("x", "y", "z")) != a.blind_terms("t", ("x", "y", "z"))
    other = Sealer(ring_from_config(json.dumps({"k1": _key()}), None, _key()))
    assert other.blind_tag("t") != a.blind_tag("t")
    assert a.tag_forms(["t"]) == ["t", a.blind_tag("t")] and NO_KEYS.tag_forms(["t"]) == ["t"]
    blind = a.blind_terms("s", ("x", "y", "z"))
    assert a.blind_terms("s", blind) == blind  # already blind terms are kept


def test_inbox_bodies_and_audit_notes_round_trip() -> None:
    s, op = sealer({"k1": _key()}), uuid.uuid4()
    text = s.seal_json(op, '{"scope":"s"}')
    assert "scope" not in text and s.open_json(op, text) == '{"scope":"s"}'
    assert s.open_json(op, '{"scope":"s"}') == '{"scope":"s"}'  # a plain body as it is
    assert s.open_note(op, s.seal_note(op, "why")) == "why"


@pytest.mark.parametrize(
    ("keys", "current", "index", "message"),
    [
        ("not json", None, INDEX, "not JSON"),
        ("{}", None, INDEX, "non-empty JSON object"),
        (json.dumps({"k 1": _key()}), None, INDEX, "key id"),
        (json.dumps({"k1": "c2hvcnQ="}), None, INDEX, "32 bytes"),
        (json.dumps({"k1": _key(), "k2": _key()}), None, INDEX, "MEMBRANE_ENCRYPTION_KEY_ID must name"),
        (json.dumps({"k1": _key()}), "k9", INDEX, "'k9' is not in"),
        (json.dumps({"k1": _key()}), None, None, "MEMBRANE_ENCRYPTION_INDEX_KEY"),
        (None, "k1", None, "need MEMBRANE_ENCRYPTION_KEYS"),
    ],
)
def test_a_broken_ring_is_refused_naming_the_setting(
    keys: str | None, current: str | None, index: str | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ring_from_config(keys, current, index)
    with pytest.raises(ValidationError, match=message):
        Settings(
            encryption_keys=SecretStr(keys) if keys else None,
            encryption_key_id=current,
            encryption_index_key=SecretStr(index) if index else None,
        )


def test_without_keys_encryption_is_off_and_settings_never_print_a_key() -> None:
    assert ring_from_config(None, None, None) is None and Settings().encryption_ring() is None
    key = _key()
    s = Settings(encryption_keys=SecretStr(json.dumps({"k1": key})), encryption_index_key=SecretStr(INDEX))
    ring = s.encryption_ring()
    assert ring is not None and ring.current == "k1"
    assert key not in repr(s) and key not in repr(ring) and INDEX not in repr(s)
