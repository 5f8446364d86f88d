"""The CLI on damaged runs: listed, verified as a problem, repaired; never another run."""

from __future__ import annotations

import json
from pathlib import Path

from _cli_helpers import Cli


def test_a_lost_run_json_is_counted_listed_and_repaired(cli: Cli, samples: Path) -> None:
    (samples / "runs" / "run_id=refunds-0001" / "run.json").unlink()

    out = cli("verify", "--all", "--store", samples)
    assert out.returncode == 1
    # refunds-0001-approve is a fork of it: its prefix cannot be checked either
    assert "8 runs: 6 ok, 2 with problems" in out.stdout
    assert "run refunds-0001: 1 problem" in out.stdout
    assert "fork_prefix: the parent cannot be read: run 'refunds-0001' is damaged" in out.stdout

    # the exact id is the damaged run, not refunds-0001-approve which it prefixes
    out = cli("verify", "refunds-0001", "--store", samples)
    assert out.returncode == 1 and "there is no run.json" in out.stdout
    assert "refunds-0001-approve" not in out.stdout

    out = cli("show", "refunds-0001", "--store", samples)
    assert out.returncode == 4 and "agentlog repair refunds-0001" in out.stderr

    out = cli("ls", "--store", samples)
    assert out.returncode == 0
    row = next(line for line in out.stdout.splitlines() if line.strip().startswith("refunds-0001 "))
    assert "damaged" in row
    assert "1 damaged run (refunds-0001)" in out.stdout

    out = cli("repair", "refunds-0001", "--json", "--store", samples)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["repaired"] and report["status"] == "finished" and report["unknown"] == ["name", "tags", "writer"]
    assert cli("verify", "--all", "--store", samples).returncode == 0
    out = cli("repair", "refunds-0001", "--store", samples)
    assert out.stdout.strip() == "run refunds-0001: run.json is fine; nothing to repair"


def test_repair_of_an_unknown_run_is_not_found(cli: Cli, samples: Path) -> None:
    out = cli("repair", "nope", "--store", samples)
    assert out.returncode == 3 and "no run 'nope'" in out.stderr
