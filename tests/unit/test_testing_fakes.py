from __future__ import annotations

import uuid

from membrane_core.enums import OperationKind
from membrane_core.inbox.submit import Dispatcher
from membrane_core.providers.base import Triple, TripleExtractor
from membrane_core.testing import DownDispatcher, RecordingDispatcher, ScriptedExtractor


def test_fakes_satisfy_their_ports() -> None:
    ids = [uuid.uuid4()]
    down: Dispatcher = DownDispatcher()
    up: Dispatcher = RecordingDispatcher()
    assert up.publish(OperationKind.CAPTURE, ids) is True  # positive control
    assert down.publish(OperationKind.CAPTURE, ids) is False
    fact = Triple(subject="ann", predicate="likes", object="tea")
    extractor = ScriptedExtractor({"Ann likes tea": [fact]})
    assert isinstance(extractor, TripleExtractor)
    assert extractor.extract(["Ann likes tea", "nothing"]) == [[fact], []]
