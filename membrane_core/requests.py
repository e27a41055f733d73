"""Requests accepted by the core: capture and retrieve (RFC 3, RFC 8)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import (
    AwareDatetime,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from membrane_core import budget, errors
from membrane_core.enums import MemoryType, Sensitivity, SourceKind
from membrane_core.models import ClientInput, Frozen, JSONDict, Scope, Tag

#: RFC 6.1: the longest maximum age a client may give a record (100 years).
MAX_AGE_LIMIT_SECONDS = 100 * 365 * 86400
#: RFC 3.3, 6.1: a record's maximum age in seconds, set by its capture or revision.
MaxAgeSeconds = Annotated[int, Field(ge=1, le=MAX_AGE_LIMIT_SECONDS)]


class CaptureRequest(ClientInput):
    """What a client offers to remember (RFC 3)."""

    source_kind: SourceKind
    scope: Scope
    content: JSONDict
    summary: str | None = Field(default=None, max_length=4096)
    reason_to_remember: str | None = Field(default=None, max_length=4096)
    tags: list[Tag] = Field(default_factory=list, max_length=64)
    sensitivity: Sensitivity | None = None
    occurred_at: AwareDatetime | None = None
    metadata: JSONDict = Field(default_factory=dict)
    #: RFC 3.3, 6.3: prune deletes the primary record once this many seconds have passed
    max_age_seconds: MaxAgeSeconds | None = None

    @model_validator(mode="before")
    @classmethod
    def _budget(cls, data: Any) -> Any:
        if isinstance(data, dict):
            content = data.get("content")
            if content is not None:
                budget.check_json_budget(
                    content,
                    field="content",
                    max_bytes=budget.MAX_PAYLOAD_BYTES,
                    max_depth=budget.MAX_PAYLOAD_DEPTH,
                )
            metadata = data.get("metadata")
            if metadata is not None:
                budget.check_json_budget(
                    metadata,
                    field="metadata",
                    max_bytes=budget.MAX_METADATA_BYTES,
                    max_depth=budget.MAX_PAYLOAD_DEPTH,
                )
        return data

    @field_validator("content")
    @classmethod
    def _content_shape(cls, content: JSONDict, info: ValidationInfo) -> JSONDict:
        # RFC 3.1: the content each source kind needs; the payload models check types.
        kind = info.data.get("source_kind")
        required = (
            {
                SourceKind.OBSERVATION: ("subject", "predicate", "object"),
                SourceKind.WORKING_STATE: ("thread_id", "task_state", "context_summary"),
            }.get(kind, ())
            if isinstance(kind, SourceKind)
            else ()
        )
        missing = [k for k in required if k not in content]
        if missing:
            raise ValueError(
                f"{kind.value if kind else ''} content needs {', '.join(required)}; "
                f"missing: {', '.join(missing)}"
            )
        return content


class ExpandOptions(Frozen):
    """Graph expansion bounds (RFC 8.4)."""

    hops: int = Field(default=1, ge=0, le=3)
    max_nodes: int = Field(default=25, ge=1, le=500)
    max_edges: int = Field(default=100, ge=1, le=2000)


#: RFC 13.2: a consistency token, the WAL position a write's answer gave (``16/B374D848``).
ConsistencyToken = Annotated[str, StringConstraints(pattern=r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$")]


class RetrieveRequest(ClientInput):
    """A bounded, trust-aware retrieval (RFC 8)."""

    query: str | None = Field(default=None, max_length=4096)
    scopes: list[Scope] | None = Field(default=None, min_length=1, max_length=256)
    max_sensitivity: Sensitivity | None = None
    memory_types: list[MemoryType] | None = None
    tags: list[Tag] | None = Field(default=None, max_length=64)
    min_salience: float = Field(default=0.0, ge=0)
    limit: int = Field(default=10, ge=1, le=200)
    max_bytes: int = Field(default=1024 * 1024, ge=1024, le=16 * 1024 * 1024)
    include_contested: bool = True
    include_retracted: bool = False
    #: RFC 5.7: proposed records too, flagged and ranked below active ones
    include_proposed: bool = False
    as_of: AwareDatetime | None = None
    valid_at: AwareDatetime | None = None
    expand: ExpandOptions | None = None
    #: RFC 13.2: a write's consistency token: the read sees that write (and every earlier one)
    min_lsn: ConsistencyToken | None = None


M = TypeVar("M", bound=ClientInput)


def parse(model: type[M], data: M | Mapping[str, Any]) -> M:
    """Validate client input into ``model``; ``InvalidInput`` names every bad field (RFC 2.4)."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        details = errors.field_errors(exc)
        summary = "; ".join(f"{d['field'] or 'body'}: {d['message']}" for d in details[:5])
        raise errors.InvalidInput(f"invalid {model.__name__}: {summary}", details=details) from exc
