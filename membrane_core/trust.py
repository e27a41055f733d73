"""Server-derived trust: policies, narrowing and sensitivity gates (RFC 7)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import Field

from membrane_core import errors
from membrane_core.enums import Sensitivity
from membrane_core.models import Frozen

ALL_SCOPES = "*"

Visibility = Literal["full", "redacted", "hidden"]


class TrustPolicy(Frozen):
    """What a principal may read and write (RFC 7.1). ``"*"`` in a list means every scope."""

    read_scopes: frozenset[str] = Field(default_factory=lambda: frozenset({ALL_SCOPES}))
    write_scopes: frozenset[str] = Field(default_factory=lambda: frozenset({ALL_SCOPES}))
    max_sensitivity: Sensitivity = Sensitivity.HYPER
    actor: str = "anonymous"
    #: RFC 7.1, 14.2: may read the deployment's own figures (inbox, backlog, Prometheus).
    operator: bool = False
    #: RFC 5.7: may decide proposals in its scopes and level (never its own)
    reviewer: bool = False
    #: RFC 5.7: what this principal writes is proposed, for a reviewer to decide
    review_required: bool = False
    #: RFC 15.4: may erase the content of records in scopes it reads and writes
    erase: bool = False

    @property
    def reads_all(self) -> bool:
        """True when the policy reads every scope."""
        return ALL_SCOPES in self.read_scopes

    def can_read_scope(self, scope: str) -> bool:
        """RFC 7.1: a record is readable only in a granted scope; empty is never a wildcard."""
        return bool(scope) and (self.reads_all or scope in self.read_scopes)

    def can_write_scope(self, scope: str) -> bool:
        """RFC 7.1: writes need an explicitly granted, non-empty scope."""
        return bool(scope) and (ALL_SCOPES in self.write_scopes or scope in self.write_scopes)

    def require_write(self, scope: str) -> None:
        """Raise ``Forbidden`` unless ``scope`` is writable."""
        if not self.can_write_scope(scope):
            raise errors.Forbidden(
                f"scope {scope!r} is not in the caller's write scopes",
                details=[{"field": "scope", "message": "not writable", "type": "forbidden"}],
            )

    def visibility(self, scope: str, sensitivity: Sensitivity) -> Visibility:
        """RFC 7.3: full at or below the maximum, redacted one level above, hidden beyond."""
        if not self.can_read_scope(scope):
            return "hidden"
        gap = sensitivity.rank - self.max_sensitivity.rank
        if gap <= 0:
            return "full"
        return "redacted" if gap == 1 else "hidden"

    def narrow(
        self,
        scopes: Iterable[str] | None = None,
        max_sensitivity: Sensitivity | None = None,
    ) -> TrustPolicy:
        """RFC 7.2: a request may only narrow its policy; asking for more is ``Forbidden``."""
        read = self.read_scopes
        if scopes is not None:
            wanted = frozenset(s.strip() for s in scopes)
            if not wanted or "" in wanted:
                raise errors.InvalidInput(
                    "scopes must be non-empty strings",
                    details=[{"field": "scopes", "message": "empty scope", "type": "value_error"}],
                )
            if ALL_SCOPES in wanted and not self.reads_all:
                raise errors.Forbidden("the caller may not read every scope")
            extra = sorted(s for s in wanted if s != ALL_SCOPES and not self.can_read_scope(s))
            if extra:
                raise errors.Forbidden(
                    f"scopes not granted to the caller: {', '.join(extra)}",
                    details=[
                        {"field": "scopes", "message": f"not granted: {s}", "type": "forbidden"}
                        for s in extra
                    ],
                )
            read = wanted
        level = self.max_sensitivity
        if max_sensitivity is not None:
            if max_sensitivity.rank > self.max_sensitivity.rank:
                raise errors.Forbidden(
                    f"max_sensitivity {max_sensitivity.value!r} is above the caller's "
                    f"{self.max_sensitivity.value!r}",
                    details=[{"field": "max_sensitivity", "message": "above policy", "type": "forbidden"}],
                )
            level = max_sensitivity
        return self.model_copy(update={"read_scopes": read, "max_sensitivity": level})


#: Development policy granted when no API keys are configured (RFC 7.5).
DEVELOPMENT_POLICY = TrustPolicy(actor="development", operator=True, reviewer=True, erase=True)
