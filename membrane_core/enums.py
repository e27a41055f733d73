"""Closed vocabularies of the record model (RFC 2.3).

Every enumeration here is also a CHECK constraint in ``schema.sql``; the two are
kept equal by ``tests/unit/test_schema_enums.py``.
"""

from __future__ import annotations

from enum import StrEnum


class MemoryType(StrEnum):
    """Record class (RFC 2.1)."""

    EPISODIC = "episodic"  #: raw experience; immutable, short-lived
    WORKING = "working"  #: state of an ongoing task
    SEMANTIC = "semantic"  #: stable, revisable knowledge
    COMPETENCE = "competence"  #: how to achieve a goal reliably
    PLAN_GRAPH = "plan_graph"  #: reusable solution structure
    ENTITY = "entity"  #: canonical entity with aliases and identifiers


class Sensitivity(StrEnum):
    """Ordered sensitivity level (RFC 7.3)."""

    PUBLIC = "public"  #: freely shareable
    LOW = "low"  #: the default
    MEDIUM = "medium"  #: moderately sensitive
    HIGH = "high"  #: needs elevated trust
    HYPER = "hyper"  #: maximum protection

    @property
    def rank(self) -> int:
        """Position in the order public < low < medium < high < hyper."""
        return _SENSITIVITY_ORDER.index(self)

    @classmethod
    def from_rank(cls, rank: int) -> Sensitivity:
        """The level at ``rank``; clamps to the ends of the order."""
        return _SENSITIVITY_ORDER[max(0, min(rank, len(_SENSITIVITY_ORDER) - 1))]


_SENSITIVITY_ORDER: tuple[Sensitivity, ...] = tuple(Sensitivity)


class RevisionStatus(StrEnum):
    """Epistemic status, enforced on every read path (RFC 5.1)."""

    ACTIVE = "active"  #: currently believed
    CONTESTED = "contested"  #: disputed; returned flagged and ranked below active
    RETRACTED = "retracted"  #: withdrawn; excluded unless asked for
    PROPOSED = "proposed"  #: awaiting review; excluded unless asked for (RFC 5.7)


class DecayCurve(StrEnum):
    """Decay function (RFC 6.1)."""

    EXPONENTIAL = "exponential"  #: base * 2^(-elapsed / half_life)


class DeletionPolicy(StrEnum):
    """How a record may be deleted (RFC 6.3)."""

    AUTO_PRUNE = "auto_prune"  #: prune may delete it at the salience floor
    MANUAL_ONLY = "manual_only"  #: only an explicit delete
    NEVER = "never"  #: never deleted


class ValidityMode(StrEnum):
    """Valid-time mode of a semantic fact (RFC 5.6)."""

    GLOBAL = "global"  #: valid everywhere, always
    CONDITIONAL = "conditional"  #: valid under stated conditions
    TIMEBOXED = "timeboxed"  #: valid within [valid_from, valid_to)


class TaskState(StrEnum):
    """State of the task a working record tracks (RFC 2.2)."""

    PLANNING = "planning"  #: planning
    EXECUTING = "executing"  #: being executed
    BLOCKED = "blocked"  #: cannot proceed
    WAITING = "waiting"  #: waiting for input
    DONE = "done"  #: finished


class OutcomeStatus(StrEnum):
    """Outcome of an experience (RFC 2.2)."""

    SUCCESS = "success"  #: completed successfully
    FAILURE = "failure"  #: failed
    PARTIAL = "partial"  #: partly succeeded


class AuditAction(StrEnum):
    """Kind of audit entry (RFC 5.5)."""

    CREATE = "create"  #: record created
    REVISE = "revise"  #: record revised (supersede, contest)
    FORK = "fork"  #: record forked into a conditional variant
    MERGE = "merge"  #: records merged
    DELETE = "delete"  #: record retracted or deleted
    REINFORCE = "reinforce"  #: salience reinforced
    DECAY = "decay"  #: salience decayed or penalised
    REQUEUE = "requeue"  #: a buried work item of the record put back by an operator (RFC 10.7)
    REVIEW = "review"  #: a reviewer's decision on the record's proposal, or its expiry (RFC 5.7)
    ERASE = "erase"  #: the record's content erased (RFC 15.4)
    IMPORT = "import"  #: the record overwritten by an import (RFC 15.2)


class ProvenanceKind(StrEnum):
    """Kind of provenance source (RFC 2.5)."""

    EVENT = "event"  #: an event
    ARTIFACT = "artifact"  #: a log, file or other artifact
    TOOL_CALL = "tool_call"  #: a tool invocation
    OBSERVATION = "observation"  #: an observation
    OUTCOME = "outcome"  #: a task outcome


class EdgeKind(StrEnum):
    """Edge kind inside a plan graph (RFC 2.2)."""

    DATA = "data"  #: data dependency
    CONTROL = "control"  #: control flow


class SourceKind(StrEnum):
    """Kind of capture offered by a client (RFC 3.1)."""

    EVENT = "event"  #: something that happened
    TOOL_OUTPUT = "tool_output"  #: a tool's result
    OBSERVATION = "observation"  #: an observed subject/predicate/object
    OUTCOME = "outcome"  #: the outcome of a task
    WORKING_STATE = "working_state"  #: the state of an ongoing task


class OperationStatus(StrEnum):
    """Status of an operation in the inbox (RFC 9.1)."""

    QUEUED = "queued"  #: accepted, not yet picked up
    RUNNING = "running"  #: claimed by a worker
    SUCCEEDED = "succeeded"  #: finished
    FAILED = "failed"  #: finished with an error


class OperationKind(StrEnum):
    """Kind of operation in the inbox (RFC 9.1)."""

    CAPTURE = "capture"  #: a capture
    SUPERSEDE = "supersede"  #: RFC 5.2.1
    FORK = "fork"  #: RFC 5.2.2
    MERGE = "merge"  #: RFC 5.2.3
    RETRACT = "retract"  #: RFC 5.2.4
    CONTEST = "contest"  #: RFC 5.2.5
    REINFORCE = "reinforce"  #: RFC 5.2.6
    PENALIZE = "penalize"  #: RFC 5.2.7
    MAINTENANCE = "maintenance"  #: RFC 6.5


class WorkKind(StrEnum):
    """Kind of background work item (RFC 9.3)."""

    EMBED = "embed"  #: compute the record's embedding
    EXTRACT = "extract"  #: LLM triple extraction from an episodic record
    CONSOLIDATE = "consolidate"  #: feed a successful episode to promotion
    COMPRESS = "compress"  #: episodic compression after the age threshold
    DECAY = "decay"  #: refresh stored salience at its checkpoint
    PRUNE = "prune"  #: consider deletion at the salience floor
    SEAL = "seal"  #: seal the record under the current encryption key (RFC 7.6)


class Job(StrEnum):
    """A background job: what beat schedules and a maintenance operation names (RFC 6.5).

    Each drains the work items of its kind (RFC 9.3); ``consolidate`` first compresses
    old episodes, then consolidates.
    """

    DECAY = "decay"
    PRUNE = "prune"
    COMPRESS = "compress"
    CONSOLIDATE = "consolidate"
    EMBED = "embed"
    EXTRACT = "extract"
    SEAL = "seal"
