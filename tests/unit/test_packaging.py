"""The built wheel carries every file the package loads at run time (SQL included), the
documentation assets (RFC 10.1) and the license."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    out = tmp_path_factory.mktemp("wheel")
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
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [built] = out.glob("membrane-*.whl")
    with zipfile.ZipFile(built) as opened:
        yield opened


def test_wheel_contains_every_sql_file(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    expected = {str(p.relative_to(ROOT)) for p in (ROOT / "membrane_core").rglob("*.sql")}
    assert len(expected) >= 10  # positive control: the tree has schema, migrations, queries
    assert expected <= names, sorted(expected - names)
    for package in ("api/app.py", "workers/app.py", "membrane_cli/main.py", "beat_schedule.py"):
        assert package in names


def test_wheel_contains_the_docs_assets_and_the_license(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assets = {str(p.relative_to(ROOT)) for p in (ROOT / "api" / "static").rglob("*") if p.is_file()}
    assert "api/static/swagger-ui/swagger-ui-bundle.js" in assets  # positive control
    assert "api/static/redoc/redoc.standalone.js" in assets
    assert assets <= names, sorted(assets - names)
    [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
    text = wheel.read(metadata).decode()
    assert "License-Expression: Apache-2.0" in text
    assert "License-File: LICENSE" in text
    [license_file] = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert wheel.read(license_file) == (ROOT / "LICENSE").read_bytes()
