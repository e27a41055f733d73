"""OpenAI-compatible chat-completion triple extractor (RFC 12.2).

One request per text: ``POST {base_url}/chat/completions`` with temperature 0
and ``response_format={"type": "json_object"}``, asking for
``{"triples": [{"subject", "predicate", "object", "confidence"}]}``. One text
per request keeps a model's mistake (or a provider failure) confined to that
text and avoids trusting the model to echo per-item ids back; the rate limiter
is what bounds the request rate.

Parsing is tolerant: code fences and prose around the JSON object are
stripped, a bare list is taken as the triples list, malformed triples are
skipped, predicates are normalised to snake_case and confidences clamped to
[0, 1]. An answer with no JSON to be found is a ``ProviderError``.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Sequence

import httpx
from pydantic import ValidationError

from membrane_core.providers import _http
from membrane_core.providers.base import (
    DEFAULT_CONFIDENCE,
    ProviderError,
    Triple,
    normalise_predicate,
)
from membrane_core.providers.ratelimit import RateLimiter

__all__ = ["SYSTEM_PROMPT", "OpenAIChatExtractor", "parse_triples"]

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You extract facts from text as subject-predicate-object triples. "
    'Answer with one JSON object of the form {"triples": [{"subject": str, '
    '"predicate": str, "object": str, "confidence": number}]} and nothing else. '
    "Use short noun phrases for subject and object, a short snake_case verb "
    "phrase for the predicate (for example is, uses, prefers, works_at, "
    "lives_in, likes), and a confidence between 0 and 1. Only state facts the "
    'text asserts; if there are none, answer {"triples": []}.'
)

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)


def _strip_fences(content: str) -> str:
    content = content.strip()
    match = _FENCE.match(content)
    return match.group(1).strip() if match else content


def _load_json(content: str) -> object:
    """The JSON in ``content``: whole, unfenced, or the outermost ``{...}``/``[...]``."""
    text = _strip_fences(content)
    try:
        return json.loads(text)
    except ValueError:
        pass
    for opening, closing in ("{}", "[]"):
        start, end = text.find(opening), text.rfind(closing)
        if 0 <= start < end:
            try:
                return json.loads(text[start : end + 1])
            except ValueError:
                continue
    raise ProviderError(f"extraction answer is not JSON: {content[:200]!r}")


def _confidence(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return DEFAULT_CONFIDENCE
    try:
        number = float(value)
    except OverflowError:  # an int beyond float range
        return 1.0 if value > 0 else 0.0
    if not math.isfinite(number):
        return DEFAULT_CONFIDENCE
    return min(1.0, max(0.0, number))


def _triple(item: object) -> Triple | None:
    if not isinstance(item, dict):
        return None
    subject, predicate, obj = (item.get(k) for k in ("subject", "predicate", "object"))
    if not (isinstance(subject, str) and isinstance(predicate, str) and isinstance(obj, str)):
        return None
    try:
        return Triple(
            subject=subject,
            predicate=normalise_predicate(predicate),
            object=obj,
            confidence=_confidence(item.get("confidence")),
        )
    except ValidationError:
        return None


def parse_triples(content: str, *, max_triples: int = 32) -> list[Triple]:
    """Triples from a model's answer, tolerating noise (RFC 12.2).

    Duplicates (same subject, predicate and object) keep the highest
    confidence; at most ``max_triples`` are returned.
    """
    data = _load_json(content)
    if isinstance(data, dict):
        items = data.get("triples")
        if not isinstance(items, list):
            raise ProviderError(f"extraction answer has no 'triples' list: {content[:200]!r}")
    elif isinstance(data, list):
        items = data
    else:
        raise ProviderError(f"extraction answer is not an object: {content[:200]!r}")
    best: dict[tuple[str, str, str], Triple] = {}
    skipped = 0
    for item in items:
        triple = _triple(item)
        if triple is None:
            skipped += 1
            continue
        key = (triple.subject, triple.predicate, triple.object)
        if key not in best or best[key].confidence < triple.confidence:
            best[key] = triple
    if skipped:
        logger.debug("skipped malformed triples", extra={"skipped": skipped})
    return list(best.values())[:max_triples]


class OpenAIChatExtractor(_http.ClientOwner):
    """Triples from an OpenAI-compatible ``/chat/completions`` endpoint (RFC 12.2)."""

    name = "http"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout: float = 60.0,
        rate_limit_per_second: float = 1.0,
        transport: httpx.BaseTransport | None = None,
        *,
        rate_limiter: RateLimiter | None = None,
        max_chars: int = 8000,
        max_triples: int = 32,
    ) -> None:
        if max_chars < 1 or max_triples < 1:
            raise ValueError("max_chars and max_triples must be >= 1")
        self.model = model
        self.max_chars = max_chars
        self.max_triples = max_triples
        self._limiter = rate_limiter if rate_limiter is not None else RateLimiter(rate_limit_per_second)
        self._url = _http.endpoint(base_url, "chat/completions")
        self._client = _http.build_client(api_key=api_key, timeout=timeout, transport=transport)

    def extract(self, texts: Sequence[str]) -> list[list[Triple]]:
        """One list of triples per text, one request per text (RFC 12.2).

        Texts longer than ``max_chars`` are cut; blank texts make no request.
        """
        if isinstance(texts, str):
            raise TypeError("extract() takes a sequence of texts, not a single str")
        return [self._extract_one(text) for text in texts]

    def _extract_one(self, text: str) -> list[Triple]:
        text = text.strip()[: self.max_chars]
        if not text:
            return []
        payload = {
            "model": self.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": text},
            ],
        }
        self._limiter.acquire()
        body = _http.post_json(self._client, self._url, payload)
        return parse_triples(self._content(body), max_triples=self.max_triples)

    def _content(self, body: object) -> str:
        choices = body.get("choices") if isinstance(body, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        if not isinstance(message, dict) or "content" not in message:
            raise ProviderError(f"malformed chat completion from {self._url}: no choices[0].message.content")
        content = message["content"]
        if not isinstance(content, str):
            raise ProviderError(
                f"chat completion from {self._url} has no text content (got {type(content).__name__})"
            )
        return content
