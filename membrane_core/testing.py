"""In-memory fakes of the core's ports, for the api and worker tests and for users'.

Each port is a small Protocol (RFC 9.5 ``Dispatcher``; RFC 12 ``EmbeddingProvider`` and
``TripleExtractor``); the fakes here need no broker, network or model. Fakes are for
unit tests only: tests of queue behaviour use a real broker and real workers.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from membrane_core.enums import OperationKind
from membrane_core.operations import InlineDispatcher, RecordingDispatcher
from membrane_core.providers.base import Triple
from membrane_core.providers.deterministic import DeterministicExtractor, HashingEmbeddingProvider


class DownDispatcher:
    """A :class:`~membrane_core.operations.Dispatcher` whose broker is down (RFC 9.5).

    Every publish answers False; the operations stay queued for beat to re-dispatch.
    """

    def __init__(self) -> None:
        self.attempts: list[tuple[OperationKind, list[uuid.UUID]]] = []

    def publish(self, kind: OperationKind, operation_ids: Sequence[uuid.UUID]) -> bool:
        """Remember the attempt and report the broker unavailable (RFC 9.5)."""
        self.attempts.append((kind, list(operation_ids)))
        return False


class ScriptedExtractor:
    """A :class:`~membrane_core.providers.base.TripleExtractor` answering from a script (RFC 12.2).

    ``script`` maps a text to the triples it "contains"; any other text yields none.
    """

    name = "scripted"

    def __init__(self, script: Mapping[str, Sequence[Triple]]) -> None:
        self.script = {text: list(triples) for text, triples in script.items()}
        self.calls: list[list[str]] = []

    def extract(self, texts: Sequence[str]) -> list[list[Triple]]:
        """The scripted triples of each text (RFC 12.2)."""
        self.calls.append(list(texts))
        return [list(self.script.get(t, [])) for t in texts]


__all__ = [
    "DeterministicExtractor",
    "DownDispatcher",
    "HashingEmbeddingProvider",
    "InlineDispatcher",
    "RecordingDispatcher",
    "ScriptedExtractor",
]
