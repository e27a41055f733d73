"""Settings never print a secret (RFC 11.3)."""

from __future__ import annotations

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
