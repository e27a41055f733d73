"""Spans of the Postgres statements, once tracing is on (RFC 14.4).

OpenTelemetry's psycopg instrumentation wraps ``psycopg.connect``, so every connection
opened after :func:`instrument` (each pooled one included) makes its cursors of a class that
turns each ``execute`` and ``executemany`` into a span. Two kinds of statement escape it and
get their spans here: ``COPY`` (the bulk writes of a capture, RFC 3.3), whose span lasts
until the copy's data is sent, and the statements of a ``psycopg.RawCursor`` built directly
(the retrieval statement, RFC 8.1.5). A span holds the statement's text, never its values,
and nothing is added to the text sent (a comment carrying the trace would make every
statement's text, and so its prepared statement, new each time).

Only :func:`membrane_core.tracing.configure` imports this module, once tracing is on.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.trace import SpanKind, Tracer, TracerProvider
from psycopg import sql

#: What :func:`instrument` replaced: (class, attribute, the class's own value or None).
_patched: list[tuple[type[Any], str, Any]] = []

_LEADING_COMMENT = re.compile(r"^\s*/\*.*?\*/", re.DOTALL)


def instrument(provider: TracerProvider) -> None:
    """RFC 14.4: spans of the statements of connections opened from now on, COPY and
    ``RawCursor`` statements on any connection."""
    if _patched:
        return
    # the instrumentation's undo leaves each class's ``connect`` a method bound to that class
    # (a subclass's would make the base class): its own classmethods are put back instead
    for cls in (psycopg.Connection, psycopg.AsyncConnection):
        _patched.append((cls, "connect", vars(cls)["connect"]))
    PsycopgInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer(__name__)
    _patch(psycopg.Cursor, "copy", _traced_copy(tracer, psycopg.Cursor.copy))
    for name in ("execute", "executemany"):
        _patch(psycopg.RawCursor, name, _traced_call(tracer, getattr(psycopg.RawCursor, name)))


def uninstrument() -> None:
    """Undo :func:`instrument` (connections opened meanwhile keep their spans)."""
    if not _patched:
        return
    PsycopgInstrumentor().uninstrument()
    while _patched:
        cls, name, own = _patched.pop()
        if own is None:
            delattr(cls, name)
        else:
            setattr(cls, name, own)


def _patch(cls: type[Any], name: str, value: Any) -> None:
    _patched.append((cls, name, vars(cls).get(name)))
    setattr(cls, name, value)


def _text(cursor: psycopg.Cursor[Any], statement: Any) -> str:
    if isinstance(statement, sql.Composable):
        return statement.as_string(cursor)
    if isinstance(statement, bytes):
        return statement.decode("utf-8", "replace")
    return statement if isinstance(statement, str) else ""


def _attributes(cursor: psycopg.Cursor[Any], text: str) -> dict[str, str]:
    # the keys of the psycopg instrumentation's own spans
    return {"db.system": "postgresql", "db.name": cursor.connection.info.dbname, "db.statement": text}


def _name(text: str) -> str:
    """RFC 14.4: a statement's span is named by its first word (``COPY``, ``WITH``, ...)."""
    words = _LEADING_COMMENT.sub("", text).split(maxsplit=1)
    return words[0] if words else "postgresql"


def _traced_copy(tracer: Tracer, copy: Callable[..., Any]) -> Callable[..., Any]:
    @contextlib.contextmanager
    def traced(self: psycopg.Cursor[Any], statement: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if not is_instrumentation_enabled():
            with copy(self, statement, *args, **kwargs) as out:
                yield out
            return
        text = _text(self, statement)
        attributes = _attributes(self, text)
        with (
            tracer.start_as_current_span(_name(text), kind=SpanKind.CLIENT, attributes=attributes),
            copy(self, statement, *args, **kwargs) as out,
        ):
            yield out

    return traced


def _traced_call(tracer: Tracer, call: Callable[..., Any]) -> Callable[..., Any]:
    def traced(self: psycopg.Cursor[Any], statement: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_instrumentation_enabled():
            return call(self, statement, *args, **kwargs)
        text = _text(self, statement)
        with tracer.start_as_current_span(
            _name(text), kind=SpanKind.CLIENT, attributes=_attributes(self, text)
        ):
            return call(self, statement, *args, **kwargs)

    return traced
