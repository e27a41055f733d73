"""``membrane --version`` prints the installed package's version (RFC 14.1)."""

from __future__ import annotations

from importlib import metadata

from typer.testing import CliRunner

from membrane_cli.main import app


def test_version_is_the_installed_package_version() -> None:
    version = metadata.version("membrane")
    assert version  # positive control: the package is installed
    out = CliRunner().invoke(app, ["--version"])
    assert out.exit_code == 0, out.output
    assert out.output.strip() == f"membrane {version}"


def test_version_runs_no_command() -> None:
    out = CliRunner().invoke(app, ["--version", "migrate"])  # eager: migrate never starts
    assert out.exit_code == 0
    assert out.output.strip().startswith("membrane ")
