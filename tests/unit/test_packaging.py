"""The built wheel carries every file the package loads at run time (SQL included)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_contains_every_sql_file(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = tmp_path.glob("membrane-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {str(p.relative_to(ROOT)) for p in (ROOT / "membrane_core").rglob("*.sql")}
    assert len(expected) >= 10  # positive control: the tree has schema, migrations, queries
    assert expected <= names, sorted(expected - names)
    for package in ("api/app.py", "workers/app.py", "membrane_cli/main.py", "beat_schedule.py"):
        assert package in names
