"""The README's "A team store on S3" section, run against moto's S3 server and a real Dask
cluster: its Python block, then its command-line block."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import s3fs
from _readme import README, section_code

from agentlog.examples import sample_store

SECTION = "A team store on S3"



def test_the_team_store_section_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     s3_env: dict[str, str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTLOG_STORE", raising=False)
    shutil.copytree(sample_store().path, tmp_path / "agentlog-runs")
    fs = s3fs.S3FileSystem()
    if not fs.exists("team-runs"):
        fs.mkdir("team-runs")
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    exec(compile(section_code("A team store on S3"), str(README), "exec"), namespace)  # noqa: S102 - the README
    team, local = namespace["team"], namespace["local"]
    assert sorted(team.list_runs()) == sorted(local.list_runs())
    assert namespace["by_day"]["cost_usd"].sum() == pytest.approx(local.cost()["cost_usd"].sum())
    pd.testing.assert_frame_equal(namespace["by_span"], local.cost(("span", "kind")), check_exact=False, rtol=1e-9)
    calls = local.sql("select count(*) as n from llm_calls")["n"][0]
    assert len(namespace["llm"].compute()) == calls  # the llm_calls table: every run as read

    env = dict(os.environ)
    for line in section_code(SECTION, "bash").splitlines():
        command = shlex.split(line.split("#", 1)[0])
        assert command[0] == "agentlog"
        out = subprocess.run([sys.executable, "-m", "agentlog.cli", *command[1:]], capture_output=True,
                             text=True, env=env, timeout=120, check=False)
        assert out.returncode == 0, (line, out.stdout, out.stderr)
        if command[1] == "push":
            assert "sent 0 files" in out.stdout  # the Python block pushed everything already
        if command[1] == "verify":
            assert out.stdout.count(": ok,") == len(local.list_runs())
