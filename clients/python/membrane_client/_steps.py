"""One body of logic for the framework adapters, run on either client.

An adapter's operation is a generator that yields :class:`Send` (a :class:`~membrane_client.Client`
method by name, with its arguments) and is sent back what that method returned, or has the
method's :class:`~membrane_client.errors.MembraneError` thrown into it. :func:`drive` runs it on a
:class:`~membrane_client.Client`, :func:`adrive` on an :class:`~membrane_client.AsyncClient`, whose
methods have the same names and arguments. So the sync and the async face of an adapter share
every decision, and only these two loops differ.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from membrane_client.async_client import AsyncClient
from membrane_client.client import Client
from membrane_client.errors import MembraneError

T = TypeVar("T")

__all__ = ["Send", "Steps", "adrive", "drive", "send"]


@dataclass(frozen=True)
class Send:
    """A call of the client method ``method`` with ``args`` and ``kwargs``."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


#: An adapter operation: yields calls, receives their answers, returns its result.
Steps = Generator[Send, Any, T]


def send(method: str, *args: Any, **kwargs: Any) -> Send:
    """The call ``client.method(*args, **kwargs)``, to be yielded by a step."""
    return Send(method, args, kwargs)


def drive(client: Client, steps: Steps[T]) -> T:
    """Run ``steps`` on the synchronous client."""
    answer: Any = None
    error: MembraneError | None = None
    while True:
        try:
            call = steps.throw(error) if error is not None else steps.send(answer)
        except StopIteration as stop:
            result: T = stop.value
            return result
        try:
            answer, error = getattr(client, call.method)(*call.args, **call.kwargs), None
        except MembraneError as exc:
            answer, error = None, exc


async def adrive(client: AsyncClient, steps: Steps[T]) -> T:
    """Run ``steps`` on the asynchronous client."""
    answer: Any = None
    error: MembraneError | None = None
    while True:
        try:
            call = steps.throw(error) if error is not None else steps.send(answer)
        except StopIteration as stop:
            result: T = stop.value
            return result
        try:
            answer, error = await getattr(client, call.method)(*call.args, **call.kwargs), None
        except MembraneError as exc:
            answer, error = None, exc
