"""Classifier and policy engine: type, confidence, sensitivity, decay profile (RFC 3.1, 3.2)."""

from __future__ import annotations

import functools

from pydantic import Field

from membrane_core.enums import DeletionPolicy, MemoryType, Sensitivity, SourceKind
from membrane_core.models import DecayProfile, Frozen
from membrane_core.settings import Settings

#: RFC 3.2: initial confidence by source kind.
CONFIDENCE_BY_SOURCE: dict[SourceKind, float] = {
    SourceKind.TOOL_OUTPUT: 0.9,
    SourceKind.EVENT: 0.8,
    SourceKind.OUTCOME: 0.8,
    SourceKind.OBSERVATION: 0.7,
    SourceKind.WORKING_STATE: 0.8,
}

#: RFC 3.2: default half-lives in seconds by type.
DEFAULT_HALF_LIVES: dict[MemoryType, int] = {
    MemoryType.EPISODIC: 3600,
    MemoryType.WORKING: 86400,
    MemoryType.SEMANTIC: 30 * 86400,
    MemoryType.COMPETENCE: 30 * 86400,
    MemoryType.PLAN_GRAPH: 30 * 86400,
    MemoryType.ENTITY: 90 * 86400,
}

#: RFC 3.2: salience floors by type; prune considers a record at its floor.
DEFAULT_FLOORS: dict[MemoryType, float] = {
    MemoryType.EPISODIC: 0.01,
    MemoryType.WORKING: 0.01,
    MemoryType.SEMANTIC: 0.05,
    MemoryType.COMPETENCE: 0.05,
    MemoryType.PLAN_GRAPH: 0.05,
    MemoryType.ENTITY: 0.05,
}

#: RFC 3.2: experience is prunable; distilled knowledge is deleted only by hand.
DEFAULT_DELETION: dict[MemoryType, DeletionPolicy] = {
    MemoryType.EPISODIC: DeletionPolicy.AUTO_PRUNE,
    MemoryType.WORKING: DeletionPolicy.AUTO_PRUNE,
    MemoryType.SEMANTIC: DeletionPolicy.MANUAL_ONLY,
    MemoryType.COMPETENCE: DeletionPolicy.MANUAL_ONLY,
    MemoryType.PLAN_GRAPH: DeletionPolicy.MANUAL_ONLY,
    MemoryType.ENTITY: DeletionPolicy.MANUAL_ONLY,
}


def classify(source_kind: SourceKind) -> MemoryType:
    """RFC 3.1: working state becomes a working record; everything else is episodic."""
    return MemoryType.WORKING if source_kind is SourceKind.WORKING_STATE else MemoryType.EPISODIC


class Policy(Frozen):
    """Stamps confidence, sensitivity and decay profile on new records (RFC 3.2)."""

    default_sensitivity: Sensitivity = Sensitivity.LOW
    half_lives: dict[MemoryType, int] = Field(default_factory=lambda: dict(DEFAULT_HALF_LIVES))
    floors: dict[MemoryType, float] = Field(default_factory=lambda: dict(DEFAULT_FLOORS))
    reinforcement_gain: dict[MemoryType, float] = Field(
        default_factory=lambda: dict.fromkeys(MemoryType, 0.1)
    )
    deletion: dict[MemoryType, DeletionPolicy] = Field(default_factory=lambda: dict(DEFAULT_DELETION))

    def confidence(self, source_kind: SourceKind) -> float:
        """RFC 3.2: initial confidence by source kind."""
        return CONFIDENCE_BY_SOURCE[source_kind]

    def sensitivity(self, requested: Sensitivity | None) -> Sensitivity:
        """RFC 3.2: the requested level, else the configured default."""
        return requested or self.default_sensitivity

    def decay_profile(self, memory_type: MemoryType) -> DecayProfile:
        """RFC 3.2: the decay profile a new record of ``memory_type`` starts with."""
        return _profile(
            self.half_lives[memory_type], self.floors[memory_type], self.reinforcement_gain[memory_type]
        )


@functools.lru_cache(maxsize=256)
def _profile(half_life: int, floor: float, gain: float) -> DecayProfile:
    # Profiles are frozen; one instance per distinct setting spares a validation per capture.
    return DecayProfile(half_life_seconds=half_life, min_salience=floor, reinforcement_gain=gain)


def policy_from_settings(settings: Settings) -> Policy:
    """RFC 3.2: the policy engine configured from settings."""
    return Policy(
        default_sensitivity=Sensitivity(settings.default_sensitivity),
        half_lives={
            MemoryType.EPISODIC: settings.half_life_episodic_seconds,
            MemoryType.WORKING: settings.half_life_working_seconds,
            MemoryType.SEMANTIC: settings.half_life_semantic_seconds,
            MemoryType.COMPETENCE: settings.half_life_competence_seconds,
            MemoryType.PLAN_GRAPH: settings.half_life_plan_graph_seconds,
            MemoryType.ENTITY: settings.half_life_entity_seconds,
        },
        reinforcement_gain=dict.fromkeys(MemoryType, settings.reinforcement_gain),
    )
