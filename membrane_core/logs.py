"""Log lines of every process: JSON or text, with the request id of their context (RFC 14.3).

Each entry point calls :func:`configure` once (the API hands :func:`config` to uvicorn, which
applies it in each of its worker processes); library code only logs through
``logging.getLogger(__name__)`` with structured ``extra`` fields. The log context (the
request id, and in a worker the task) is a context variable: :func:`bind` sets fields for
the code that runs inside, and the handler's :class:`ContextFilter` adds them to every record.
"""

from __future__ import annotations

import contextvars
import json
import logging
import logging.config
import re
import sys
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TextIO

#: RFC 14.3: the formats of ``MEMBRANE_LOG_FORMAT``; ``auto`` is ``text`` on a terminal.
LogFormat = Literal["json", "text", "auto"]
#: RFC 14.3: the level names ``MEMBRANE_LOG_LEVEL`` accepts.
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

#: RFC 14.3: the longest request id kept (the ``operations.request_id`` column's bound too).
MAX_REQUEST_ID = 128
_REQUEST_ID = re.compile(rf"[A-Za-z0-9._:=+/-]{{1,{MAX_REQUEST_ID}}}")

#: Loggers that narrate each HTTP call at INFO; they log from WARNING unless the level is DEBUG.
CHATTY = ("httpx", "httpcore")

# Attributes every LogRecord has, plus those the formatters add and uvicorn's colour copy
# of its message: anything else on a record came from ``extra`` or the log context.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "color_message",
}

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_context: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar("membrane_log_context")
#: RFC 14.4: the ids of the span current at a line, once tracing is on (set by
#: ``membrane_core.tracing``); unset, a line pays nothing for it.
_span_ids: Callable[[], Mapping[str, str]] | None = None


# -- request ids and the log context ---------------------------------------------------------


def is_request_id(value: object) -> bool:
    """RFC 14.3: a request id is 1 to 128 letters, digits or ``._:=+/-``."""
    return isinstance(value, str) and _REQUEST_ID.fullmatch(value) is not None


def new_request_id() -> str:
    """A fresh request id (32 hex digits)."""
    return uuid.uuid4().hex


def context() -> Mapping[str, Any]:
    """The fields bound in the current context."""
    return _context.get(_EMPTY)


def bind(**fields: Any) -> contextvars.Token[Mapping[str, Any]]:
    """Add ``fields`` to the log context of the code that runs next; :func:`unbind` undoes it."""
    return _context.set(MappingProxyType({**context(), **fields}))


def unbind(token: contextvars.Token[Mapping[str, Any]]) -> None:
    """Restore the log context :func:`bind` replaced."""
    _context.reset(token)


def span_ids(source: Callable[[], Mapping[str, str]] | None) -> None:
    """RFC 14.4: add what ``source`` returns (the current span's ``trace_id`` and ``span_id``)
    to every line; ``None`` stops it."""
    global _span_ids
    _span_ids = source


def request_id() -> str | None:
    """RFC 14.3: the request id of the current context, if any."""
    value = context().get("request_id")
    return value if isinstance(value, str) else None


class ContextFilter(logging.Filter):
    """Adds the log context's fields to each record that does not carry them already."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in context().items():
            if key not in record.__dict__:
                setattr(record, key, value)
        if _span_ids is not None:
            for key, value in _span_ids().items():
                if key not in record.__dict__:
                    setattr(record, key, value)
        return True


# -- formats -----------------------------------------------------------------------------------


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record's ``extra`` and context fields, by name."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}


def _plain(value: Any) -> Any:
    """A JSON-able stand-in for a value ``json`` cannot write."""
    if isinstance(value, date):  # datetimes too
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, uuid.UUID | Path):
        return str(value)
    return repr(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, default=_plain, separators=(",", ":"))


class JsonFormatter(logging.Formatter):
    """RFC 14.3: one JSON object a line: time, level, logger, message, pid, then every field.

    A field named like one of the five is written as ``extra_<name>``; a value JSON cannot
    hold (a circular structure, a dict with non-string keys) is written as its ``repr``.
    """

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        for key, value in fields(record).items():
            out[f"extra_{key}" if key in out else key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        try:
            return _dumps(out)
        except (TypeError, ValueError):  # one field defeats the encoder: write it as its repr
            safe = {}
            for key, value in out.items():
                try:
                    _dumps(value)
                except (TypeError, ValueError):
                    value = repr(value)
                safe[key] = value
            return _dumps(safe)


def _text(value: Any) -> str:
    if isinstance(value, str) and value and not any(c.isspace() or c in "\"'=" for c in value):
        return value
    try:
        return _dumps(value)
    except (TypeError, ValueError):
        return repr(value)


class TextFormatter(logging.Formatter):
    """RFC 14.3: ``time LEVEL logger message key=value ...`` for a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        pairs = " ".join(f"{key}={_text(value)}" for key, value in fields(record).items())
        return f"{line} {pairs}" if pairs else line


# -- setup -------------------------------------------------------------------------------------


def resolve(log_format: str, stream: TextIO | None = None) -> Literal["json", "text"]:
    """RFC 14.3: ``auto`` is ``text`` when ``stream`` (stderr) is a terminal, else ``json``."""
    if log_format in ("json", "text"):
        return "json" if log_format == "json" else "text"
    if log_format != "auto":
        raise ValueError(f"log format must be json, text or auto, got {log_format!r}")
    out = sys.stderr if stream is None else stream
    isatty = getattr(out, "isatty", None)
    return "text" if callable(isatty) and isatty() else "json"


def level_name(level: str | int) -> str:
    """``level`` (a name in any case, or a number) as one of :data:`LEVELS`."""
    name = logging.getLevelName(level) if isinstance(level, int) else level.strip().upper()
    if name not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    return str(name)


def config(log_format: str = "auto", level: str | int = "INFO") -> dict[str, Any]:
    """RFC 14.3: the ``logging.config.dictConfig`` of a process: one stderr handler on the root.

    The same dictionary is uvicorn's ``log_config``: uvicorn's loggers propagate to the
    root, and its access log stays off (the API writes its own, RFC 14.3).
    """
    name = level_name(level)
    formatter = JsonFormatter if resolve(log_format) == "json" else TextFormatter
    chatty = name if name == "DEBUG" else "WARNING"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": f"{__name__}.ContextFilter"}},
        "formatters": {"membrane": {"()": f"{__name__}.{formatter.__name__}"}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "filters": ["context"],
                "formatter": "membrane",
            }
        },
        "root": {"level": name, "handlers": ["stderr"]},
        "loggers": {
            "uvicorn": {"handlers": [], "propagate": True},
            "uvicorn.error": {"handlers": [], "propagate": True},
            "uvicorn.access": {"handlers": [], "propagate": False},
            **{logger: {"level": chatty} for logger in CHATTY},
        },
    }


def configure(log_format: str = "auto", level: str | int = "INFO") -> None:
    """RFC 14.3: set up this process's logging; an entry point calls it once, first."""
    logging.config.dictConfig(config(log_format, level))
    logging.captureWarnings(True)
