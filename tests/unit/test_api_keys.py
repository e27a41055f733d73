"""The key ring's entries, the key file's checks and the key listing (RFC 10.3, 10.6, 14.1)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.auth import DEFAULT_LIMITS, KeyRing, fingerprint, key_from_config
from api.keyfile import KeyFile, configured_keys, keys_file
from api.ratelimit import RateLimits
from membrane_cli.main import app as cli
from membrane_core import Settings, errors

POLICY = {"read_scopes": ["a"], "write_scopes": ["a"]}


def test_an_entry_carries_limits_defaulted_from_the_settings_and_an_aware_not_after() -> None:
    defaults = RateLimits(requests_per_second=5, captures_per_second=50, burst=3)
    entry = key_from_config(
        "k", {**POLICY, "captures_per_second": 7, "not_after": "2030-01-01T00:00:00Z"}, defaults
    )
    assert entry.limits == RateLimits(requests_per_second=5, captures_per_second=7, burst=3)
    assert entry.not_after == datetime(2030, 1, 1, tzinfo=UTC)
    assert entry.policy.actor == f"key:{fingerprint('k')}"
    assert DEFAULT_LIMITS == RateLimits(requests_per_second=1000, captures_per_second=20000, burst=2)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("not_after", "2030-01-01T00:00:00", "no time zone"),
        ("not_after", "next week", "ISO 8601"),
        ("not_after", 1893456000, "ISO 8601"),
        ("requests_per_second", 0, "positive number"),
        ("captures_per_second", -1, "positive number"),
        ("burst", "fast", "positive number"),
        ("burst", True, "positive number"),
        ("burst", float("inf"), "positive number"),
        ("rate", 5, "unknown"),
    ],
)
def test_a_bad_entry_is_refused_naming_the_field(field: str, value: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        KeyRing({"k": {**POLICY, field: value}})
    assert KeyRing({"k": POLICY}).enabled  # control


def test_keys_of_one_actor_share_one_limit() -> None:
    same = {**POLICY, "actor": "pipeline", "captures_per_second": 100}
    ring = KeyRing({"old": {**same, "not_after": "2020-01-01T00:00:00Z"}, "new": same})  # a rotation
    limits = ring.limits("pipeline")
    assert limits is not None and limits.captures_per_second == 100
    assert ring.limits("someone-else") is None
    with pytest.raises(ValueError, match="one rate limit"):
        KeyRing({"old": same, "new": {**same, "captures_per_second": 200}})


def test_expiry_is_checked_at_each_request() -> None:
    now = [datetime(2030, 1, 1, tzinfo=UTC)]
    ring = KeyRing({"k": {**POLICY, "not_after": "2030-01-01T00:00:10+00:00"}}, clock=lambda: now[0])
    assert ring.authenticate("Bearer k").write_scopes == {"a"}
    now[0] += timedelta(seconds=10)
    with pytest.raises(errors.Unauthorized, match=r"^API key expired$"):
        ring.authenticate("Bearer k")


def test_the_key_file_is_looked_at_once_a_second(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"k": POLICY}))
    t = [0.0]
    source = KeyFile(path, clock=lambda: t[0])
    assert source.read() == {"k": POLICY}
    assert not source.changed()  # control: unchanged (looked at t=0)
    path.write_text(json.dumps({"k2": POLICY}))
    t[0] = 0.5
    assert not source.changed()  # changed, but looked at less than a second ago
    t[0] = 1.0
    assert source.changed()
    t[0] = 1.5
    assert not source.changed()  # at most one look a second
    t[0] = 2.1
    assert source.changed()  # still unread
    source.read()
    t[0] = 3.2
    assert not source.changed()


def test_both_key_variables_or_a_broken_file_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"k": POLICY}))
    assert configured_keys(Settings(api_keys_file=path)) == {"k": POLICY}
    assert keys_file(Settings(api_keys_file=Path(""))) is None  # an empty variable is unset
    with pytest.raises(errors.InvalidInput, match="both set"):
        configured_keys(Settings(api_keys_file=path, api_keys={"other": POLICY}))
    path.write_text('["k"]')
    with pytest.raises(errors.InvalidInput, match="must be a JSON object"):
        configured_keys(Settings(api_keys_file=path))


def test_membrane_keys_lists_ids_and_policies_never_a_key(tmp_path: Path) -> None:
    secret = "keys-sekrit-5d1c08e2"
    keys = {
        secret: {**POLICY, "captures_per_second": 42},
        "keys-sekrit-other": {**POLICY, "actor": "pipeline", "not_after": "2020-01-01T00:00:00Z"},
    }
    env = {"MEMBRANE_API_KEYS": json.dumps(keys), "MEMBRANE_API_KEYS_FILE": ""}
    table = CliRunner().invoke(cli, ["keys"], env=env)
    assert table.exit_code == 0, table.output
    assert f"key:{fingerprint(secret)}" in table.output and "pipeline" in table.output  # control
    assert "expired" in table.output and "42 captures/s" in table.output
    listed = CliRunner().invoke(cli, ["keys", "--json"], env=env)
    rows = {r["id"]: r for r in json.loads(listed.output)}
    assert rows[f"key:{fingerprint(secret)}"]["captures_per_second"] == 42
    assert rows["pipeline"]["expired"] is True
    for out in (table.output, listed.output):
        assert "sekrit" not in out

    path = tmp_path / "keys.json"
    path.write_text(json.dumps(keys))
    from_file = CliRunner().invoke(
        cli, ["keys", "--json"], env={"MEMBRANE_API_KEYS": None, "MEMBRANE_API_KEYS_FILE": str(path)}
    )
    assert from_file.exit_code == 0 and "sekrit" not in from_file.output
    assert {r["id"] for r in json.loads(from_file.output)} == set(rows)
    path.write_text("{")
    broken = CliRunner().invoke(
        cli, ["keys"], env={"MEMBRANE_API_KEYS": None, "MEMBRANE_API_KEYS_FILE": str(path), "COLUMNS": "400"}
    )
    assert broken.exit_code == 2 and "not valid JSON" in broken.output
