"""Where the Prometheus figures of several processes meet, and who may read a pool's (RFC 14.2, 7.5)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import SecretStr

from api import server
from membrane_core import Settings, errors
from workers import metrics as worker_metrics

ENV = "PROMETHEUS_MULTIPROC_DIR"


def test_a_given_directory_is_emptied_of_its_values_at_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "counter_123.db").write_bytes(b"old")
    (tmp_path / "histogram_456.db").write_bytes(b"old")
    (tmp_path / "README").write_text("kept")
    monkeypatch.setenv(ENV, str(tmp_path))
    with server.metrics_dir(workers=2) as path:
        assert path == str(tmp_path)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["README"]
    assert tmp_path.is_dir()  # given, so kept


def test_several_processes_get_a_directory_of_their_own_for_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with server.metrics_dir(workers=2) as path:
        assert path is not None and Path(path).is_dir()
        assert os.environ[ENV] == path  # what the spawned processes inherit
    assert not Path(path).exists() and ENV not in os.environ
    with server.metrics_dir(workers=1) as one:  # one process keeps its figures in memory
        assert one is None and ENV not in os.environ


def test_a_pools_metrics_off_loopback_need_the_token_and_tls_or_the_opt_in() -> None:
    assert worker_metrics.check_listen(Settings(worker_metrics_host="127.0.0.1")) is None
    with pytest.raises(errors.Forbidden, match="MEMBRANE_METRICS_TOKEN"):
        worker_metrics.check_listen(Settings(worker_metrics_host="0.0.0.0"))
    token = SecretStr("t")
    with pytest.raises(errors.Forbidden):  # the token would travel in plaintext
        worker_metrics.check_listen(Settings(worker_metrics_host="0.0.0.0", metrics_token=token))
    opted = Settings(worker_metrics_host="0.0.0.0", metrics_token=token, allow_insecure_credentials=True)
    warning = worker_metrics.check_listen(opted)
    assert warning and "MEMBRANE_ALLOW_INSECURE_CREDENTIALS" in warning
    assert worker_metrics.check_listen(Settings(worker_metrics_host="::1", metrics_token=token)) is None
