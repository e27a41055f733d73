"""Settings never print a secret (RFC 11.3)."""

from __future__ import annotations

import pytest

from membrane_core import Settings

SECRETS = {
    "api_keys": {"key-sekrit-1": {"read_scopes": ["*"]}, "key-sekrit-2": {"read_scopes": ["a"]}},
    "database_url": "postgresql://membrane:pg-sekrit@db/membrane",
    "read_database_url": "postgresql://membrane:replica-sekrit@replica/membrane",
    "redis_url": "redis://:redis-sekrit@redis:6379/0",
    "flower_basic_auth": "admin:flower-sekrit",
    "embedding_api_key": "emb-sekrit",
    "llm_api_key": "llm-sekrit",
    "metrics_token": "scrape-sekrit",
}


def test_repr_and_str_mask_every_secret() -> None:
    s = Settings(**SECRETS)  # type: ignore[arg-type]
    for text in (repr(s), str(s)):
        assert "sekrit" not in text, text
        assert "<2 keys>" in text  # positive control: the keys are there, counted
        assert "redis://:***@redis:6379/0" in text  # the URL stays readable without its password
    # positive control: the values themselves are intact for the code that needs them
    assert s.api_keys == SECRETS["api_keys"]
    assert s.redis_url == SECRETS["redis_url"]
    assert s.metrics_token is not None and s.metrics_token.get_secret_value() == "scrape-sekrit"


def test_the_embedding_provider_defaults_to_the_local_model_when_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RFC 12.1: ``auto`` is ``local`` with the extra and at 384 dimensions, else ``none``."""
    from membrane_core import settings as settings_module

    monkeypatch.delenv("MEMBRANE_EMBEDDING_PROVIDER", raising=False)
    monkeypatch.setattr(settings_module, "local_model_installed", lambda: True)
    chosen = Settings()
    assert (chosen.embedding_provider, chosen.embedding_provider_auto) == ("local", True)
    assert Settings(embedding_dim=768).embedding_provider == "none"  # not the model's size
    monkeypatch.setattr(settings_module, "local_model_installed", lambda: False)
    assert Settings().embedding_provider == "none"
    explicit = Settings(embedding_provider="hashing")  # a named provider is kept as it is
    assert (explicit.embedding_provider, explicit.embedding_provider_auto) == ("hashing", False)


def test_rate_fail_defaults_to_open_and_refuses_another_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """RFC 10.6: ``MEMBRANE_RATE_FAIL`` is ``open`` or ``closed``; a typo refuses the start."""
    from pydantic import ValidationError

    monkeypatch.delenv("MEMBRANE_RATE_FAIL", raising=False)
    assert Settings().rate_fail == "open"
    monkeypatch.setenv("MEMBRANE_RATE_FAIL", "closed")
    assert Settings().rate_fail == "closed"
    monkeypatch.setenv("MEMBRANE_RATE_FAIL", "shut")
    with pytest.raises(ValidationError, match="rate_fail"):
        Settings()


def test_a_role_sets_the_connections_timeouts() -> None:
    """RFC 10.5: the role's statement, lock and idle-transaction timeouts go after any options
    the URL gives, with the TCP options; the command line runs unbounded."""
    from membrane_core.storage.db import role_options

    opts = role_options("postgresql://u@h/db?options=-c%20search_path%3Dx", "api")
    assert opts["options"].startswith("-c search_path=x -c statement_timeout=60000")
    assert "-c lock_timeout=10000" in opts["options"] and opts["tcp_user_timeout"] == 20_000
    assert "statement_timeout=0" in role_options("postgresql://u@h/db", "cli")["options"]
