"""Membrane: a memory substrate for LLM agents (RFC 1)."""

from __future__ import annotations

from membrane_core import errors
from membrane_core.enums import MemoryType, RevisionStatus, Sensitivity, SourceKind
from membrane_core.facade import Membrane
from membrane_core.models import MemoryRecord
from membrane_core.requests import CaptureRequest, RetrieveRequest
from membrane_core.results import CaptureResult, RecordView, RetrieveResult
from membrane_core.settings import Settings
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy

__all__ = [
    "DEVELOPMENT_POLICY",
    "CaptureRequest",
    "CaptureResult",
    "Membrane",
    "MemoryRecord",
    "MemoryType",
    "RecordView",
    "RetrieveRequest",
    "RetrieveResult",
    "RevisionStatus",
    "Sensitivity",
    "Settings",
    "SourceKind",
    "TrustPolicy",
    "errors",
]
