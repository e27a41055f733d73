"""The console's form input: url-encoded bodies and the filters of its query strings (RFC 10.8)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import Depends
from starlette.requests import Request

from membrane_core import errors

#: The body of a console form, the largest a console form can send (a supersede's payload).
MAX_FORM_BYTES = 256 * 1024


@dataclass(frozen=True)
class Form:
    """A posted form: each field's values in order."""

    fields: Mapping[str, Sequence[str]]

    def get(self, name: str, default: str = "") -> str:
        """The field's first value, stripped; ``default`` when absent."""
        values = self.fields.get(name)
        return values[0].strip() if values else default

    def all(self, name: str) -> list[str]:
        """Every non-empty value of the field."""
        return [v.strip() for v in self.fields.get(name, ()) if v.strip()]


async def form(request: Request) -> Form:
    """The url-encoded body of a console form (what browsers and htmx send).

    Read here, on the event loop, so that the handlers stay plain ``def``.
    """
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise errors.InvalidInput("a console form is sent as application/x-www-form-urlencoded")
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise errors.PayloadTooLarge(f"a console form holds at most {MAX_FORM_BYTES} bytes")
    fields: dict[str, list[str]] = {}
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError as exc:
        raise errors.InvalidInput("the form is not UTF-8") from exc
    for name, value in pairs:
        fields.setdefault(name, []).append(value)
    return Form(fields)


Posted = Annotated[Form, Depends(form)]


def moment(value: str | None, field: str) -> datetime | None:
    """A time from a form or query: ISO 8601; without a zone (a ``datetime-local`` input) UTC."""
    if value is None or not value.strip():
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError as exc:
        raise errors.InvalidInput(
            f"{field}: not a date and time ({value!r})",
            details=[{"field": field, "message": "not an ISO 8601 time", "type": "value_error"}],
        ) from exc
    return when if when.utcoffset() is not None else when.replace(tzinfo=UTC)


def listed(values: Sequence[str] | None) -> list[str] | None:
    """A repeated query parameter without its empty values; None when none is left."""
    kept = [v.strip() for v in values or () if v and v.strip()]
    return kept or None


def given(**params: Any) -> dict[str, Any]:
    """The filters a caller gave, for a core request model."""
    return {k: v for k, v in params.items() if v is not None and v != [] and v != ""}
