"""Evidence recall of the default retrieval on a fixed subset of LoCoMo and REALTALK (RFC 14.1).

The path of ``membrane eval locomo`` (``membrane_cli.evaluate``): one fresh embedded Postgres,
the turns captured and the questions asked through the HTTP API in-process, beside the
baselines of the same run. The subset, small enough for CI:

- LoCoMo: the first conversation, its first ``SESSIONS`` sessions;
- REALTALK: the first chat (by its number), its first ``SESSIONS`` sessions;

each with only the questions whose evidence lies wholly in those sessions, embedded with the
offline ``hashing`` embedder (no model to load; the local model took 37-39 s here, against
7-11 s). The data is read at run time from ``$MEMBRANE_EVAL_DIR`` (default
``/work/shared/eval``) and nothing of it is written anywhere: the figures below are numbers
measured on it, not data. Without the data the test fails; it does not skip.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from membrane_cli import evaluate

pytestmark = pytest.mark.slow

EVAL_DIR_VARIABLE = "MEMBRANE_EVAL_DIR"
DEFAULT_EVAL_DIR = Path("/work/shared/eval")
SESSIONS = 10

# Measured with this file's subset and settings, on the 2-core host, through the HTTP API
# in-process, each run on a fresh store. Without adjacent episodes (RFC 8.2.1) the default
# retrieval scored 0.643 and 0.444 in every one of ten runs; with them, LoCoMo moved between
# 0.774 and 0.780 over two runs (an episode entering at a score another shares is ordered by
# id) and REALTALK stayed at 0.452. FLOOR is the lowest seen. The plain Okapi BM25 is computed
# in Python and deterministic. A run fails below FLOOR - MARGIN; MARGIN is two REALTALK
# questions (one question moves its recall@10 by up to 1/42).
#: recall@10 of the default retrieval.
FLOOR = {"locomo": 0.774, "realtalk": 0.452}
#: recall@10 of the plain Okapi BM25 in Python; the default stays above OKAPI - MARGIN.
OKAPI = {"locomo": 0.625, "realtalk": 0.409}
#: Questions scored on the subset: the floors hold for this subset only.
SCORED = {"locomo": 80, "realtalk": 42}
MARGIN = 0.05


def eval_dir() -> Path:
    """The folder holding ``locomo-dev.json`` and ``realtalk/``; fails if either is missing."""
    root = Path(os.environ.get(EVAL_DIR_VARIABLE) or DEFAULT_EVAL_DIR)
    missing = [str(p) for p in (root / "locomo-dev.json", root / "realtalk") if not p.exists()]
    if missing:
        pytest.fail(
            f"evaluation data not found ({', '.join(missing)}): set {EVAL_DIR_VARIABLE} to the "
            "folder holding locomo-dev.json and realtalk/ (default /work/shared/eval)",
            pytrace=False,
        )
    return root


def test_default_retrieval_holds_its_recall_floor_and_stays_above_bm25() -> None:
    root = eval_dir()
    sources = {"locomo": root / "locomo-dev.json", "realtalk": root / "realtalk"}
    tag = uuid.uuid4().hex[:8]
    runs = [
        evaluate.Run.of(evaluate.load_dataset(name, path).subset(conversations=1, sessions=SESSIONS), tag)
        for name, path in sources.items()
    ]
    evaluate.evaluate_in_process(runs, embedding="hashing")

    problems = []
    for run in runs:
        name, cats = run.dataset.name, tuple(run.dataset.categories)
        default_name, default = next(iter(run.tallies.items()))
        assert default_name.startswith("membrane (HTTP in-process)"), default_name
        okapi = run.tallies[evaluate.OKAPI]
        scored = sum(default.n.values())
        recall, bm25 = default.value("recall@10", cats), okapi.value("recall@10", cats)
        figures = f"{name}: recall@10 {recall:.3f}, Okapi {bm25:.3f}, {scored} questions"
        if scored != SCORED[name] or abs(bm25 - OKAPI[name]) > 0.0005:
            problems.append(f"{figures}: not the subset the floors were measured on; measure them again")
        if recall < FLOOR[name] - MARGIN:
            problems.append(f"{figures}: below the floor {FLOOR[name]} - {MARGIN}")
        if recall < bm25 - MARGIN:
            problems.append(f"{figures}: below the plain BM25 baseline - {MARGIN}")
    assert not problems, "; ".join(problems)
