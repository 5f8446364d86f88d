"""Every ``agentlog`` command on the sample runs, through the real console script in a subprocess.

Each test gets its own copy of the sample store (``--store``). Assertions are grouped per
command to keep the number of process starts (about 0.5 s each) small.
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _cli_helpers import Cli
from _prices import genai_prices_cost

import agentlog as al
from agentlog.numbers import fmt_usd, usd_sum

IDS = ("sre-0001", "sre-0001-calm", "sre-0002", "refunds-0001", "refunds-0001-approve",
       "refunds-0002-tight", "diligence-0001", "jobhunt-0001")


def _one_line_error(stderr: str) -> str:
    """The error line; fails if there is a traceback or more than one line."""
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("agentlog: error: ")
    return lines[0]


def test_help_lists_the_commands_and_exit_codes(cli: Cli) -> None:
    out = cli("--help")
    assert out.returncode == 0
    for command in ("demo", "ls", "show", "verify", "replay", "fork", "diff", "cost", "export", "import",
                    "report", "gc"):
        assert f"  {command} " in out.stdout
    assert "Exit codes:" in out.stdout
    for code in ("0 ", "1 ", "2 ", "3 ", "4 ", "5 ", "6 ", "130 "):
        assert f"\n    {code}" in out.stdout
    fork = cli("fork", "--help")
    assert fork.returncode == 0
    for kind in ('"tool_result"', '"llm_response"', '"state_patch"', '"input"'):
        assert kind in fork.stdout


def test_ls_text_and_json(cli: Cli, samples: Path) -> None:
    out = cli("--store", samples, "ls")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:3] == ["run", "name", "status"]
    assert [line.split()[0] for line in lines[1:len(IDS) + 1]] == list(IDS)
    assert "sre-0001@26" in out.stdout and "budget_exceeded" in out.stdout
    assert lines[0].split()[7:12] == ["paid", "total", "incl.", "inherited", "prefix"]
    assert lines[-1].startswith("paid: the run's own events")
    assert lines[-1].endswith("a fork's events, llm, tools and tokens are incl. inherited prefix too")
    store = al.Store(samples)
    calm, parent = store.run("sre-0001-calm"), store.run("sre-0001")
    total = fmt_usd(usd_sum(calm.events["cost_usd"]))
    assert total == fmt_usd(usd_sum(parent.events["cost_usd"].iloc[:calm.fork_seq + 1])
                            + usd_sum(calm.events["cost_usd"].iloc[calm.fork_seq + 1:]))
    calm_row = lines[1 + list(IDS).index("sre-0001-calm")].split()
    # paid (its own events) and the total incl. the prefix it inherited, priced by genai-prices
    expected = [fmt_usd(genai_prices_cost(calm, own=True)), fmt_usd(genai_prices_cost(calm))]
    assert [t for t in calm_row if t.startswith("$")] == expected
    data = json.loads(cli("--store", samples, "ls", "--json").stdout)
    assert [r["run_id"] for r in data] == list(IDS)
    calm = data[1]
    assert (calm["parent"], calm["fork_seq"], calm["events"], calm["own_events"]) == ("sre-0001", 26, 39, 12)
    assert calm["created"].startswith("2026-07-02T08:38:49")
    assert calm["tags"]["fork_of"] == "sre-0001"  # an object, not JSON text inside JSON


def test_ls_of_an_empty_store(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    out = cli("--store", tmp_path / "empty", "ls")
    assert out.returncode == 0
    assert "no runs in" in out.stdout and "agentlog demo" in out.stdout


def test_ls_of_a_store_that_is_not_there(cli: Cli, tmp_path: Path) -> None:
    for command in ("ls", "cost"):
        out = cli("--store", tmp_path / "nothing", command)
        assert out.returncode == 2, (command, out.stdout)
        assert f"{tmp_path / 'nothing'}: no such store" in out.stderr
    assert cli("--store", tmp_path / "nothing", "ls", "--json").returncode == 2
    assert not (tmp_path / "nothing").exists()  # reading does not create the store


def test_every_command_that_reads_a_store_says_it_is_not_there(tmp_path: Path, samples: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Not "no run 'sre-0001'" (a missing run), which sends a user with a typo in --store looking for
    the run; in the test process (one console-script start per command would be slow)."""
    from agentlog.cli import _util, main

    for field in ("store_path", "quiet", "debug"):  # the CLI sets them; put them back after
        monkeypatch.setattr(_util.options, field, getattr(_util.options, field))
    missing = tmp_path / "nothing"
    key = tmp_path / "key.pem"
    assert main(["keygen", str(key)]) == 0
    commands = [["show", "sre-0001"], ["cost", "sre-0001"], ["diff", "sre-0001", "sre-0002"],
                ["verify", "sre-0001"], ["verify", "--all"], ["gc"], ["export", "sre-0001"],
                ["report", "sre-0001"], ["replay", "sre-0001", "--program", "example:sre"],
                ["fork", "sre-0001", "--at", "26", "--program", "example:sre"], ["checkpoint", "sre-0001"],
                ["repair", "sre-0001"], ["sign", "sre-0001", "--key", str(key)], ["prove", "sre-0001", "3"],
                ["push", str(tmp_path / "team")]]
    capsys.readouterr()
    for command in commands:
        assert main(["--store", str(missing), *command]) == 2, command
        assert capsys.readouterr().err == f"agentlog: error: {missing}: no such store (the folder does not exist)\n"
    assert not missing.exists() and not (tmp_path / "team").exists()  # reading creates nothing
    # pull: the store pulled from; the store pulled into may be new
    remote = tmp_path / "no-remote"
    assert main(["--store", str(samples), "pull", str(remote), "sre-0001"]) == 2
    assert capsys.readouterr().err == f"agentlog: error: {remote}: no such remote store (the folder does not exist)\n"


def test_show_text_json_and_run_folder(cli: Cli, samples: Path) -> None:
    out = cli("--store", samples, "show", "sre-0001-c", "--events", "3")  # a unique prefix
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("Run sre-0001-calm 'sre example, calm database'")
    for fact in ("status: finished", "events: 12 own · 39 incl. inherited prefix", "verified: ok",
                 "forked from: sre-0001 at seq 26", "gpt-4o-mini", "events (3 of 39):", "run.started"):
        assert fact in text
    # a run folder works without --store
    folder = samples / "runs" / "run_id=refunds-0002-tight"
    data = json.loads(cli("show", folder, "--json").stdout)
    assert data["summary"]["run_id"] == "refunds-0002-tight"
    assert data["summary"]["status"] == "budget_exceeded"
    # an object, as in agentlog ls --json, not JSON text inside JSON
    assert data["summary"]["tags"] == al.Store(samples).run("refunds-0002-tight").meta["tags"]
    assert data["verify"]["ok"] is True and data["verify"]["events"] == 60
    assert data["cost_by_model"][0]["model"] == "claude-3-5-haiku-latest"


def test_show_labels_what_includes_a_forks_inherited_prefix(cli: Cli, samples: Path) -> None:
    store = al.Store(samples)
    fork, parent = store.run("refunds-0001-approve"), store.run("refunds-0001")
    assert fork.fork_seq is not None

    def facts(frame: Any) -> dict[str, str]:
        calls = {t: int((frame["type"] == t).sum()) for t in ("llm.response", "tool.result", "span.started")}
        tokens = " · ".join(f"{int(frame[c].sum()):,} {w}" for c, w in
                            (("input_tokens", "in"), ("output_tokens", "out"), ("cached_tokens", "cached")))
        return {"events": f"{len(frame):,}", "model calls": f"{calls['llm.response']:,}",
                "tool calls": f"{calls['tool.result']:,}", "spans": f"{calls['span.started']:,}", "tokens": tokens}

    everything = facts(fork.events)
    own = facts(fork.events[fork.events["seq"] > fork.fork_seq])
    lines = cli("--store", samples, "show", fork.id, "--no-verify").stdout.splitlines()
    for fact in ("events", "model calls", "tool calls"):
        assert f"  {fact}: {own[fact]} own · {everything[fact]} incl. inherited prefix" in lines, fact
    assert f"  spans: {everything['spans']} incl. inherited prefix" in lines
    assert any(line.startswith("  duration: ") and line.endswith(" incl. inherited prefix") for line in lines)
    assert f"  tokens (own): {own['tokens']}" in lines
    assert f"  tokens incl. inherited prefix: {everything['tokens']}" in lines
    own_events = fork.events[fork.events["seq"] > fork.fork_seq]
    served = sum(1 for e in fork.iter_events(fork.fork_seq + 1) if e.type == "llm.response"
                 and e.payload.get("served_from_seq") is not None and not e.payload.get("edited"))
    assert served  # the sample fork replays its parent's answers up to its edit
    assert f"  paid: {fmt_usd(usd_sum(own_events['cost_usd']))} ({served} answers served from a recorded run, " \
           "at no cost)" in lines
    assert f"  total incl. inherited prefix: {fmt_usd(usd_sum(fork.events['cost_usd']))}" in lines
    # a run that is not a fork: every figure is its own, and nothing says "own" or "prefix"
    text = cli("--store", samples, "show", parent.id, "--no-verify").stdout
    mine = facts(parent.events)
    for fact in ("events", "model calls", "tool calls", "spans", "tokens"):
        assert f"  {fact}: {mine[fact]}\n" in text, fact
    assert "own" not in text.split("\n\n")[0] and "prefix" not in text
    assert "served from a recorded run" not in text  # its answers are live


def test_unknown_and_ambiguous_runs(cli: Cli, samples: Path) -> None:
    missing = cli("--store", samples, "show", "nope")
    assert missing.returncode == 3
    assert "'nope'" in _one_line_error(missing.stderr)
    ambiguous = cli("--store", samples, "diff", "sre", "refunds-0001")
    assert ambiguous.returncode == 2
    line = _one_line_error(ambiguous.stderr)
    assert "matches 3 runs: sre-0001, sre-0001-calm, sre-0002" in line
    usage = cli("--store", samples, "verify")  # neither RUN nor --all
    assert usage.returncode == 2 and "--all" in _one_line_error(usage.stderr)
    bad_option = cli("--store", samples, "export", "sre-0001", "--format", "pdf")
    assert bad_option.returncode == 2 and "pdf" in bad_option.stderr and "Traceback" not in bad_option.stderr


def test_verify_all_expect_head_and_json(cli: Cli, samples: Path) -> None:
    out = cli("--store", samples, "verify", "--all")
    assert out.returncode == 0, out.stdout
    assert out.stdout.count(": ok, ") == len(IDS)
    assert "8 runs: 8 ok, 0 with problems" in out.stdout
    head = al.Store(samples).run("sre-0001").head
    data = json.loads(cli("--store", samples, "verify", "sre-0001", "--expect-head", head[:16], "--json").stdout)
    assert data["ok"] is True and data["head"] == head and data["head_ok"] is True
    wrong = cli("--store", samples, "verify", "sre-0001", "--expect-head", "0" * 64)
    assert wrong.returncode == 1
    first = wrong.stdout.splitlines()[0]  # the first line says what is wrong, not "ok"
    assert first == (f"run sre-0001: head differs from the expected {'0' * 64}: it is {head} "
                     "(78 events; the chain is intact)")
    right = cli("--store", samples, "verify", "sre-0001", "--expect-head", head[:16])
    assert right.stdout.splitlines() == [f"run sre-0001: ok, 78 events, head {head[:12]}… is the expected head"]


def _tamper(store: Path, run_id: str, seq: int) -> None:
    """Change one payload inside a sealed segment, leaving its stored hash as it was."""
    (path,) = (store / "runs" / f"run_id={run_id}").glob("events-*.parquet")
    table = pq.read_table(path)
    payloads = table.column("payload").to_pylist()
    payloads[seq] = payloads[seq].replace("orders", "ORDERS", 1)
    i = table.schema.get_field_index("payload")
    pq.write_table(table.set_column(i, table.schema.field(i), pa.array(payloads, table.schema.field(i).type)),
                   path)


def test_verify_a_tampered_run_names_the_seq(cli: Cli, samples: Path) -> None:
    _tamper(samples, "sre-0002", 10)
    out = cli("--store", samples, "verify", "sre-0002")
    assert out.returncode == 1
    assert "run sre-0002: 1 problem, 64 events, first bad seq 10" in out.stdout
    assert "seq 10: chain_broken" in out.stdout
    every = cli("--store", samples, "verify", "--all", "--json")
    assert every.returncode == 1
    bad = [r for r in json.loads(every.stdout) if not r["ok"]]
    assert [(r["run_id"], r["first_bad_seq"]) for r in bad] == [("sre-0002", 10)]


def test_a_damaged_segment_is_a_store_error(cli: Cli, samples: Path) -> None:
    (path,) = (samples / "runs" / "run_id=jobhunt-0001").glob("events-*.parquet")
    path.write_bytes(path.read_bytes()[:100])
    out = cli("--store", samples, "show", "jobhunt-0001", "--no-verify")
    assert out.returncode == 4
    assert path.name in _one_line_error(out.stderr)
    debug = cli("--store", samples, "--debug", "show", "jobhunt-0001", "--no-verify")
    assert debug.returncode == 4 and "Traceback" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1].startswith("agentlog: error: ")
    verify = cli("--store", samples, "verify", "jobhunt-0001")
    assert verify.returncode == 1 and "first bad seq" in verify.stdout


def test_diff_text_json_and_exit_codes(cli: Cli, samples: Path) -> None:
    out = cli("--store", samples, "diff", "sre-0001", "sre-0001-calm")
    assert out.returncode == 1  # the runs differ
    assert "first divergence at seq 27" in out.stdout
    assert "0.93 → 0.35" in out.stdout
    assert "input_tokens" in out.stdout and "-2,874" in out.stdout
    data = json.loads(cli("--store", samples, "diff", "sre-0001", "sre-0001-calm", "--json").stdout)
    assert (data["divergence"], data["prefix"], data["prefix_from"]) == (27, 27, "lineage")
    assert data["usage"]["llm_calls"] == {"a": 6.0, "b": 3.0, "delta": -3.0}
    assert any(r["status"] == "changed" and r["seq_a"] == 28 for r in data["rows"])
    same = cli("--store", samples, "diff", "sre-0001", "sre-0001")
    assert same.returncode == 0 and "the same 78 events" in same.stdout


def test_cost_store_and_runs(cli: Cli, samples: Path) -> None:
    out = cli("--store", samples, "cost")
    assert out.returncode == 0, out.stderr
    assert "claude-3-5-haiku-latest" in out.stdout and "total: 51 model calls" in out.stdout
    store = al.Store(samples)
    paid = sum(genai_prices_cost(store.run(r), own=True) for r in store.list_runs())
    assert out.stdout.splitlines()[-1].endswith(f"tokens, paid {fmt_usd(paid)}")  # every cost known
    data = json.loads(cli("--store", samples, "cost", "--by", "run,model", "--json").stdout)
    expected = al.Store(samples).cost(by=["run", "model"])
    assert len(data) == len(expected)
    assert abs(sum(r["cost_usd"] for r in data) - float(expected["cost_usd"].sum())) < 1e-12
    one = json.loads(cli("--store", samples, "cost", "sre-0001-calm", "--json").stdout)
    llm = [r for r in one if r["model"] == "gpt-4o-mini"]
    calm = al.Store(samples).run("sre-0001-calm")
    own = calm.llm_calls()
    assert llm[0]["llm_calls"] == int((own["seq"] > calm.fork_seq).sum()) == 1  # what the fork paid for
    text = cli("--store", samples, "cost", "sre-0001").stdout
    assert "(tool calls)" in text and "paid" in text.splitlines()[0] and "–" not in text
    # --by run over RUNs: one row per run, as over the whole store (these runs are not forks)
    whole = {r["run_id"]: r for r in json.loads(cli("--store", samples, "cost", "--by", "run", "--json").stdout)}
    picked = json.loads(cli("--store", samples, "cost", "sre-0001", "jobhunt-0001", "--by", "run", "--json").stdout)
    assert picked == [whole["sre-0001"], whole["jobhunt-0001"]]
    assert picked[0]["llm_calls"] == 6 and picked[0]["tool_calls"] == 6
    assert cli("--store", samples, "cost", "--by", "colour").returncode == 2


def test_unknown_costs_stay_unknown_in_cost_and_ls(cli: Cli, tmp_path: Path) -> None:
    """An answer with no price is never $0: the cell says unknown and the total "+ N unknown"."""
    store = al.Store(tmp_path / "dark")
    with store.create_run(run_id="dark", durability="none") as w:
        for i, (model, usd) in enumerate([("house-model-x", None), ("house-model-x", None),
                                          ("gpt-4o-mini", 0.25)]):
            w.emit("llm.response", {"key": f"k{i}", "model": model, "usage": {"input_tokens": 3},
                                    "message": {"role": "assistant", "content": "ok"}},
                   model=model, input_tokens=3, cost_usd=usd)
    out = cli("--store", store.path, "cost")
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:-1]}
    assert rows["house-model-x"][-1] == "unknown" and rows["gpt-4o-mini"][-1] == fmt_usd(0.25)
    assert out.stdout.splitlines()[-1].endswith(f"tokens, paid {fmt_usd(0.25)} + 2 unknown")
    data = json.loads(cli("--store", store.path, "cost", "--json").stdout)
    assert [r["cost_usd"] for r in data] == [0.25, None]  # JSON: null, not 0
    ls = cli("--store", store.path, "ls").stdout.splitlines()
    assert f"{fmt_usd(0.25)} + 2 unknown" in ls[1]


def test_replay_strict(cli: Cli, samples: Path) -> None:
    ok = cli("--store", samples, "replay", "refunds-0001", "--program", "example:refunds")
    assert ok.returncode == 0, ok.stderr
    assert "strict replay ok: 136 events, 20 calls from the log, 0 live" in ok.stdout
    wrong = cli("--store", samples, "replay", "sre-0001", "--program", "example:refunds")
    assert wrong.returncode == 5  # the refunds agent raises on the sre run's inputs
    assert "the program raised KeyError" in _one_line_error(wrong.stderr)
    missing = cli("--store", samples, "replay", "sre-0001", "--program", "no_such_module:program")
    assert missing.returncode == 2 and "no_such_module" in _one_line_error(missing.stderr)


def test_replay_of_a_program_that_raises_exits_5(cli: Cli, samples: Path, tmp_path: Path) -> None:
    (tmp_path / "boom.py").write_text("def prog(rec):\n    raise RuntimeError('boom')\n\n\n"
                                      "def other(rec):\n    rec.patch([{'op': 'add', 'path': '/x', 'value': 1}])\n")
    differs = cli("--store", samples, "replay", "sre-0001", "--program", "boom:other", cwd=tmp_path)
    assert differs.returncode == 1 and "diverged at seq 1" in differs.stdout
    out = cli("--store", samples, "replay", "sre-0001", "--program", "boom:prog", cwd=tmp_path)
    assert out.returncode == 5, out.stdout
    assert _one_line_error(out.stderr) == ("agentlog: error: replay of run sre-0001: the program raised RuntimeError: boom "
                                           "(at seq 1, where the recorded run has span.started)")


@pytest.mark.parametrize("kind", ["tool_result", "replace_response"])  # the CLI's name, and al.edit's
def test_fork_with_an_edit_file(cli: Cli, samples: Path, tmp_path: Path, kind: str) -> None:
    edit = tmp_path / "edit.json"
    edit.write_text(json.dumps({"kind": kind, "seq": 28,
                                "result": {"service": "orders-db", "metric": "cpu", "value": 0.2}}))
    out = cli("--store", samples, "fork", "sre-0001", "--at", "26", "--program", "example:sre",
              "--edit", edit, "--run-id", f"cli-fork-{kind}", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["run_id"], data["parent"], data["at"], data["divergence"]) == (f"cli-fork-{kind}", "sre-0001", 26, 27)
    fork = al.Store(samples).run(f"cli-fork-{kind}")
    assert fork.parent is not None and fork.parent.id == "sre-0001" and fork.verify().ok
    result = next(e for e in fork.iter_events(27) if e.type == "tool.result")
    assert result.payload["result"]["value"] == 0.2 and result.payload["edited"] is True


def test_an_edit_file_takes_al_edits_names(cli: Cli, samples: Path, tmp_path: Path) -> None:
    """replace_response of a model answer, patch_state: what al.edit calls them."""
    answer = next(e.seq for e in al.Store(samples).run("sre-0001").iter_events(27) if e.type == "llm.response")
    edit = tmp_path / "edits.json"
    edit.write_text(json.dumps([{"kind": "replace_response", "seq": answer, "content": "all calm"},
                                {"kind": "patch_state", "ops": [{"op": "add", "path": "/mode", "value": "careful"}]}]))
    out = cli("--store", samples, "fork", "sre-0001", "--at", "26", "--program", "example:sre",
              "--edit", edit, "--run-id", "cli-fork-names", "--json")
    assert out.returncode == 0, out.stderr
    fork = al.Store(samples).run("cli-fork-names")
    edited = [e for e in fork.iter_events(27) if e.type == "llm.response" and e.payload.get("edited")]
    assert edited and edited[0].payload["message"]["content"] == "all calm"
    assert fork.state_at(len(fork) - 1)["vars"]["mode"] == "careful"


def test_fork_refuses_bad_edit_files(cli: Cli, samples: Path, tmp_path: Path) -> None:
    cases = {
        "broken.json": ('{"kind": "tool_result", "seq": 28,', 2, "broken.json:1: not JSON"),
        "kind.json": ('[{"kind": "state_patch", "ops": []}, {"kind": "teleport"}]', 2,
                      "kind.json [1]: kind 'teleport' is not one of"),
        "early.json": ('{"kind": "tool_result", "seq": 10, "result": 1}', 2, "seq 10 must be after the cut"),
        "type.json": ('{"kind": "llm_response", "seq": 28, "content": "hi"}', 2,
                      "run sre-0001 seq 28 is a tool.result, not an llm.response"),
        "empty.json": ("[]", 2, "empty.json: no edits"),
        "late.json": ('{"kind": "tool_result", "seq": 999, "result": 1}', 3,  # exit 3: no such seq
                      "late.json: no such seq 999 in run sre-0001"),
    }
    for name, (text, code, message) in cases.items():
        (tmp_path / name).write_text(text)
        out = cli("--store", samples, "fork", "sre-0001", "--at", "26", "--program", "example:sre",
                  "--edit", tmp_path / name)
        assert out.returncode == code, (name, out.stdout, out.stderr)
        assert message in _one_line_error(out.stderr), name
    far = cli("--store", samples, "fork", "sre-0001", "--at", "500", "--program", "example:sre")
    assert far.returncode == 3 and "--at 500: no such seq in run sre-0001" in _one_line_error(far.stderr)
    last = cli("--store", samples, "fork", "sre-0001", "--at", "77", "--program", "example:sre")
    assert last.returncode == 2 and "last event" in _one_line_error(last.stderr)
    assert al.Store(samples).list_runs() == list(IDS)  # nothing was created


def test_jsonl_export_import_keeps_the_hashes(cli: Cli, samples: Path, tmp_path: Path) -> None:
    src = tmp_path / "calm.jsonl"
    out = cli("--store", samples, "export", "sre-0001-calm", "-o", src)
    assert out.returncode == 0, out.stderr
    assert "39 events written to" in out.stdout
    other = tmp_path / "other"
    back = cli("--store", other, "import", src, "--format", "jsonl", "--json")
    assert back.returncode == 0, back.stderr
    (info,) = json.loads(back.stdout)
    assert info["run_id"] == "sre-0001-calm" and info["verified"] is True and info["events"] == 39
    a = al.Store(samples).run("sre-0001-calm").table().column("hash").to_pylist()
    b = al.Store(other).run("sre-0001-calm").table().column("hash").to_pylist()
    assert a == b
    again = cli("--store", other, "import", src, "--format", "jsonl")  # the id is taken now
    assert again.returncode == 4
    line = _one_line_error(again.stderr)
    assert "run 'sre-0001-calm' already exists" in line and "--run-id NEW" in line
    assert "store.writer" not in line
    src.write_text(src.read_text().replace("orders-db", "orders-xx", 1))
    tampered = cli("--store", tmp_path / "third", "import", src, "--format", "jsonl")
    assert tampered.returncode == 2
    assert "calm.jsonl:" in _one_line_error(tampered.stderr)


def test_otlp_export_and_import(cli: Cli, samples: Path, tmp_path: Path) -> None:
    trace = tmp_path / "refunds.otlp.json"
    out = cli("--store", samples, "export", "refunds-0001", "--format", "otlp", "-o", trace)
    assert out.returncode == 0, out.stderr
    request = json.loads(trace.read_text())
    assert request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    back = cli("--store", tmp_path / "otel", "import", trace, "--format", "otlp", "--name", "from otel")
    assert back.returncode == 0, back.stderr
    assert "verified ok" in back.stdout
    (run,) = (al.Store(tmp_path / "otel").run(rid) for rid in al.Store(tmp_path / "otel").list_runs())
    assert run.name == "from otel" and len(run.llm_calls()) == 12


def test_report_and_html_export(cli: Cli, samples: Path, tmp_path: Path) -> None:
    out = cli("--store", samples, "report", "sre-0001", "--vs", "sre-0001-calm", "-o", tmp_path / "r.html")
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "r.html").read_text()
    assert page.count("Plotly.newPlot(") >= 3
    assert "first divergence at seq 27" in page
    from agentlog.report import plotly_js_name
    assert page.count("* plotly.js v") == 0 and f'src="{plotly_js_name()}"' in page  # one shared copy
    assert (tmp_path / plotly_js_name()).stat().st_size > 10 * len(page.encode())
    assert "with plotly.js beside it" in out.stdout
    one = cli("--store", samples, "report", "sre-0001", "--inline", "-o", tmp_path / "one.html")
    assert one.returncode == 0 and (tmp_path / "one.html").read_text().count("* plotly.js v") == 1
    html = cli("--store", samples, "export", "jobhunt-0001", "--format", "html", "-o", tmp_path / "j.html")
    assert html.returncode == 0 and "jobhunt-0001" in (tmp_path / "j.html").read_text()


def test_gc_dry_run_then_apply(cli: Cli, samples: Path) -> None:
    orphan = al.Store(samples).blobs.put(b"nobody references me").digest
    path = al.Store(samples).blobs.path(orphan)
    old = time.time() - 3600
    os.utime(path, (old, old))
    dry = cli("--store", samples, "gc")
    assert dry.returncode == 0
    assert "gc (dry run): 1 unreferenced blobs" in dry.stdout and orphan in dry.stdout
    assert path.exists()
    done = json.loads(cli("--store", samples, "gc", "--apply", "--json").stdout)
    assert done["applied"] is True and done["digests"] == [orphan]
    assert not path.exists()
    assert cli("--store", samples, "verify", "--all").returncode == 0


def test_import_drangue_and_activegraph(cli: Cli, tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop"))
    from _interop_sources import activegraph_sink_run, drangue_sre

    db = tmp_path / "drangue.db"
    # in a thread of its own: drangue calls asyncio.run, which refuses to run inside the event
    # loop that Playwright's sync API leaves in the main thread when browser tests ran first
    with ThreadPoolExecutor(1) as pool:
        pool.submit(drangue_sre, db, "sre-1").result()
        pool.submit(drangue_sre, db, "sre-2").result()
        sink, _ = pool.submit(activegraph_sink_run, tmp_path).result()
    store = tmp_path / "imported"
    both = cli("--store", store, "import", db, "--format", "drangue", "--json")
    assert both.returncode == 0, both.stderr
    assert [(r["events"], r["verified"]) for r in json.loads(both.stdout)] == [(10, True), (10, True)]
    again = cli("--store", store, "import", db, "--format", "drangue", "--json")
    assert json.loads(again.stdout) == json.loads(both.stdout)  # the same runs, nothing added
    two = cli("--store", store, "import", db, "--format", "drangue", "--run-id", "d2")
    assert two.returncode == 2 and "a new run id names one run, and the file has 2" in _one_line_error(two.stderr)
    out = cli("--store", store, "import", db, "--format", "drangue", "--run", "sre-2", "--run-id", "d2", "--json")
    assert out.returncode == 0, out.stderr
    (info,) = json.loads(out.stdout)
    assert info["run_id"] == "d2" and info["verified"] is True
    assert len(al.Store(store).run("d2").llm_calls()) == 3
    graph = cli("--store", store, "import", sink, "--format", "activegraph", "--name", "graph run")
    assert graph.returncode == 0, graph.stderr
    assert "verified ok" in graph.stdout
    assert "graph run" in cli("--store", store, "ls").stdout
    missing = cli("--store", store, "import", tmp_path / "nope.db", "--format", "drangue")
    assert missing.returncode == 2 and "nope.db: no such file" in _one_line_error(missing.stderr)
