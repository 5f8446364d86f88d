"""``agentlog demo --no-lab`` in a fresh folder: the store, the table, verify, the report."""

from __future__ import annotations

from pathlib import Path

from _cli_helpers import Cli

import agentlog as al


def test_demo_makes_the_store_verifies_and_writes_the_report(cli: Cli, tmp_path: Path) -> None:
    cwd = tmp_path / "fresh"
    cwd.mkdir()
    out = cli("demo", "--no-lab", cwd=cwd)
    assert out.returncode == 0, out.stderr
    store = cwd / "agentlog-runs"
    assert al.Store(store).list_runs() == al.examples.sample_store().list_runs()
    text = out.stdout
    assert f"copied the bundled sample runs to {store}" in text
    for rid in al.Store(store).list_runs():
        assert f"run {rid}: ok," in text  # every run verified
        assert f"\n{rid} " in text or f" {rid} " in text  # and listed in the table
    assert "verified 8 runs: all ok" in text
    report = cwd / "agentlog-demo-report.html"
    page = report.read_text()
    assert "sre-0001-calm" in page and "first divergence at seq 27" in page
    assert f"wrote the report of sre-0001 vs sre-0001-calm to {report}" in text
    # a second demo reuses the store and changes nothing in it
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    again = cli("demo", "--no-lab", "--report", "again.html", cwd=cwd)
    assert again.returncode == 0, again.stderr
    assert f"using the existing store {store} (8 runs)" in again.stdout
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before
    # --record refuses a store that has runs
    refused = cli("demo", "--no-lab", "--record", cwd=cwd)
    assert refused.returncode == 2 and "--store NEW_FOLDER" in refused.stderr


def test_demo_record_rerecords_the_same_bytes(cli: Cli, tmp_path: Path) -> None:
    # --store after the command works as well as before it
    out = cli("demo", "--no-lab", "--record", "--store", tmp_path / "rec", "--report", tmp_path / "r.html")
    assert out.returncode == 0, out.stderr
    assert "recorded the sample runs with the example agents" in out.stdout
    assert "verified 8 runs: all ok" in out.stdout
    bundled = al.examples.sample_runs_path()
    segments = sorted(p.relative_to(bundled) for p in bundled.glob("runs/*/events-*.parquet"))
    assert segments
    for rel in segments:
        assert (tmp_path / "rec" / rel).read_bytes() == (bundled / rel).read_bytes(), rel


def test_demo_reports_a_damaged_run_and_goes_on(cli: Cli, tmp_path: Path) -> None:
    cwd = tmp_path / "damaged"
    store = cwd / "agentlog-runs"
    al.examples.sample_store(copy_to=store)
    (store / "runs" / "run_id=sre-0001" / "run.json").write_text("{not json")
    out = cli("demo", "--no-lab", cwd=cwd)
    assert out.returncode == 1, out.stderr  # a run does not verify
    assert "Traceback" not in out.stderr
    text = out.stdout
    assert "run sre-0001: 1 problem" in text and "run.json: not valid JSON" in text
    assert "run sre-0002: ok," in text and "run jobhunt-0001: ok," in text  # it went on
    assert "verified 8 runs: 2 with problems" in text  # sre-0001-calm's parent cannot be read
    # the report and the hint name a run that verified, the same one
    assert "wrote the report of sre-0002 to" in text
    assert f"next: agentlog --store {store} show sre-0002," in text
    assert "sre-0002" in (cwd / "agentlog-demo-report.html").read_text()
