from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
from membrane_core import Membrane
m = Membrane()
res = m.capture({"source_kind": "event", "scope": "demo", "content": {"text": "embedded default works"}})
assert m.get(res.record_ids[0]).scope == "demo"
found = m.retrieve({"query": "embedded default"})
assert [r.id for r in found.records] == [res.record_ids[0]], found
m.close()
print("ok", m.db.dsn.split("host=")[-1])
"""


def test_library_works_with_no_environment(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    try:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("ok")
        assert (tmp_path / ".local/share/membrane/pg/PG_VERSION").exists()
    finally:
        subprocess.run(
            [
                sys.executable,
                "-c",
                "from pathlib import Path; from membrane_core.storage import embedded;"
                f"embedded.stop(Path({str(tmp_path / '.local/share/membrane')!r}))",
            ],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
