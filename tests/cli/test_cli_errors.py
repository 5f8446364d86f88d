"""How ``agentlog`` ends when something is wrong: closed pipes, files it cannot read or write,
a fork that diverges or reuses an id; and ``--store`` after the command.

Through the real console script, grouped to keep the number of process starts small; a few
checks of one function run in the test process.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from _cli_helpers import AGENTLOG, Cli

import agentlog as al
from agentlog.cli import _util


def _error_line(stderr: str) -> str:
    """The one error line; fails on a traceback or a second line."""
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("agentlog: error: ")
    return lines[0]


def test_a_closed_pipe_ends_quietly_with_exit_0(samples: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "AGENTLOG_STORE"}
    # like `agentlog export diligence-0001 -o - | head -c 50`: 180 kB, more than a pipe holds
    proc = subprocess.Popen([str(AGENTLOG), "--store", str(samples), "export", "diligence-0001", "-o", "-"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    head = proc.stdout.read(50)
    proc.stdout.close()  # the reader leaves
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0, err
    assert head.startswith(b"{") and err == ""


def test_files_it_cannot_read_or_write_are_exit_2_naming_them(cli: Cli, samples: Path, tmp_path: Path) -> None:
    folder = cli("--store", samples, "export", "sre-0001", "-o", tmp_path)
    assert folder.returncode == 2
    assert f"cannot write {tmp_path}: it is a folder" in _error_line(folder.stderr)
    missing = tmp_path / "no-such-folder"
    for args in (("export", "sre-0001", "-o", missing / "x.jsonl"),
                 ("report", "sre-0001", "-o", missing / "r.html")):
        out = cli("--store", samples, *args)
        assert out.returncode == 2, out.stderr
        assert (f"cannot write {missing / args[-1].name}: folder {missing} does not exist"
                in _error_line(out.stderr))
    imported = cli("--store", samples, "import", tmp_path, "--format", "jsonl")
    assert imported.returncode == 2 and f"{tmp_path}: is a folder" in _error_line(imported.stderr)
    if Path("/dev/full").exists():
        full = cli("--store", samples, "export", "sre-0001", "-o", "/dev/full")
        assert full.returncode == 2
        assert _error_line(full.stderr) == "agentlog: error: /dev/full: No space left on device"


def test_os_errors_are_bad_input_with_the_file_and_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    for exc in (PermissionError(13, "Permission denied", "/srv/runs/x.html"),
                IsADirectoryError(21, "Is a directory", "/tmp"),
                OSError(28, "No space left on device", "/dev/full")):
        assert _util.error_code(exc) == _util.ExitCode.BAD_INPUT
        assert _util.report_error(exc) == 2
        assert capsys.readouterr().err == f"agentlog: error: {exc.filename}: {exc.strerror}\n"
    assert _util.error_code(FileNotFoundError(2, "No such file or directory", "x")) == 2


def test_a_fork_that_diverges_keeps_the_lines_and_names_its_run(cli: Cli, samples: Path) -> None:
    # the refunds program does something else than the sre run before the cut
    out = cli("--store", samples, "fork", "sre-0001", "--at", "26", "--program", "example:refunds",
              "--run-id", "wrong-program")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    lines = out.stderr.rstrip().splitlines()
    assert lines[0] == "agentlog: error: run sre-0001: replay diverged at seq 1"
    assert any(line.strip().startswith("expected: span.started") for line in lines)
    assert any(line.strip().startswith("actual:") for line in lines)
    assert lines[-1].strip() == "(fork recorded as run wrong-program)"
    assert al.Store(samples).run("wrong-program").status == "failed"
    taken = cli("--store", samples, "fork", "sre-0001", "--at", "26", "--program", "example:sre",
                "--run-id", "sre-0001-calm")
    assert taken.returncode == 4
    line = _error_line(taken.stderr)
    assert "run 'sre-0001-calm' already exists" in line and "--run-id NEW" in line
    assert "store.writer" not in line


def test_store_after_the_command(cli: Cli, samples: Path, tmp_path: Path) -> None:
    before = cli("--store", samples, "ls")
    after = cli("ls", "--store", samples)
    assert before.returncode == after.returncode == 0, after.stderr
    assert after.stdout == before.stdout and "sre-0001-calm" in after.stdout
    # after the command wins over before it; --store=PATH works too
    show = cli("--store", tmp_path / "elsewhere", "show", "sre-0001", f"--store={samples}", "--no-verify",
               "--json")
    assert show.returncode == 0, show.stderr
    assert json.loads(show.stdout)["summary"]["run_id"] == "sre-0001"
    assert "--store PATH" in cli("show", "--help").stdout


def test_show_computes_the_summary_once(samples: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from agentlog.analysis import tables
    from agentlog.cli import main
    from agentlog.store.run import Run

    for field in ("store_path", "quiet", "debug"):  # the CLI sets them; put them back after
        monkeypatch.setattr(_util.options, field, getattr(_util.options, field))
    calls = []
    summary = tables.summary

    def counted(run: Run, **options: bool) -> object:
        calls.append(run.id)
        return summary(run, **options)

    monkeypatch.setattr(tables, "summary", counted)  # run.summary() resolves it on each call
    assert main(["--store", str(samples), "show", "sre-0001", "--no-verify"]) == 0
    assert capsys.readouterr().out.startswith("Run sre-0001 ")
    assert calls == ["sre-0001"]


def test_one_number_format_for_the_cli_and_the_report() -> None:
    from agentlog import report
    from agentlog.cli import _inspect
    from agentlog.widgets.html import fmt_num

    copies = {"report": [n for n in ("_num", "_records", "_na") if hasattr(report, n)],
              "_inspect": [n for n in ("_num", "_usd") if hasattr(_inspect, n)]}
    assert copies == {"report": [], "_inspect": []}
    assert [fmt_num(v) for v in (2874.0, 0.000864, 0.0)] == ["2,874", "0.000864", "0"]
    assert [fmt_num(v, sign=True) for v in (-2874.0, 0.5, -0.0)] == ["-2,874", "+0.5", "0"]
    assert fmt_num(float("nan")) == "–"


def test_a_fork_whose_model_call_raises_is_exit_5_naming_the_seq(cli: Cli, samples: Path, tmp_path: Path) -> None:
    parent = al.Store(samples).run("sre-0001")
    # the orders-db CPU reading after the cut, served without its value: the sre model reads it
    cpu = next(e for e in parent.iter_events()
               if e.type == "tool.result" and e.seq > 26 and e.payload["result"].get("metric") == "cpu")
    edit = tmp_path / "e.json"
    edit.write_text(json.dumps({"kind": "tool_result", "seq": cpu.seq,
                                "result": {k: v for k, v in cpu.payload["result"].items() if k != "value"}}))
    for run_id, debug in (("no-value", ()), ("no-value-debug", ("--debug",))):
        out = cli("--store", samples, *debug, "fork", "sre-0001", "--at", "26", "--program", "example:sre",
                  "--edit", edit, "--run-id", run_id)
        assert out.returncode == 5, out.stderr
        failed = next(e for e in al.Store(samples).run(run_id).iter_events() if e.type == "error")
        assert out.stderr.splitlines()[-1] == (
            f"agentlog: error: fork of run sre-0001 at seq 26: the program raised {failed.payload['error']} "
            f"in its model call at seq {failed.seq} (fork recorded as run {run_id})")
        assert ("Traceback" in out.stderr) == bool(debug)
        assert ("examples/sre.py" in out.stderr) == bool(debug)  # where the program raised


PROGRAM = '''
def _cpu(name):
    return 0.93


def _no_limit(name, strict):
    raise LookupError(f"no limit for {name}")


def recorded(rec):
    cpu = rec.tool("get_metric", {"name": "cpu"}, _cpu)
    return cpu > rec.tool("get_limit", {"name": "cpu"}, lambda name: 0.8)


def broken(rec):  # asks another limit than the recorded run: sent live, and it raises
    cpu = rec.tool("get_metric", {"name": "cpu"}, _cpu)
    return cpu > rec.tool("get_limit", {"name": "cpu", "strict": True}, _no_limit)
'''


def test_a_fork_whose_tool_raises_is_exit_5_naming_the_tool_and_seq(cli: Cli, samples: Path,
                                                                    tmp_path: Path) -> None:
    import importlib.util

    (tmp_path / "limits.py").write_text(PROGRAM)
    spec = importlib.util.spec_from_file_location("limits", tmp_path / "limits.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    parent = al.record(module.recorded, store=samples, name="limits")
    at = next(e.seq for e in parent.iter_events() if e.type == "tool.result")
    out = cli("--store", samples, "fork", parent.id, "--at", at, "--program", "limits:broken",
              "--run-id", "no-limit", cwd=tmp_path)
    assert out.returncode == 5, out.stderr
    failed = next(e for e in al.Store(samples).run("no-limit").iter_events()
                  if e.type in ("error", "tool.result") and e.payload.get("error"))
    assert _error_line(out.stderr) == (
        f"agentlog: error: fork of run {parent.id} at seq {at}: the program raised "
        f"{failed.payload['error']} in tool 'get_limit' at seq {failed.seq} (fork recorded as run no-limit)")


def test_the_debug_hint_is_left_out_with_debug(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        error = exc  # with a traceback to print
    for debug in (False, True):
        monkeypatch.setattr(_util.options, "debug", debug)
        assert _util.report_error(error) == _util.ExitCode.INTERNAL
        err = capsys.readouterr().err
        hint = "; run again with --debug for the traceback"
        assert err.splitlines()[-1] == "agentlog: error: unexpected RuntimeError: boom" + ("" if debug else hint)
        assert ("Traceback" in err) == debug


def test_messages_put_an_before_a_vowel_sound(cli: Cli, samples: Path, tmp_path: Path) -> None:
    run = al.Store(samples).run("sre-0001")
    tool = next(e for e in run.iter_events() if e.type == "tool.result" and e.seq > 26)
    llm = next(e for e in run.iter_events() if e.type == "llm.response" and e.seq > 26)
    for kind, named, wanted in (("llm_response", tool, "an llm.response"), ("tool_result", llm, "a tool.result")):
        edit = tmp_path / f"{kind}.json"
        edit.write_text(json.dumps({"kind": kind, "seq": named.seq, "content": "x", "result": {}}))
        out = cli("--store", samples, "fork", "sre-0001", "--at", "26", "--program", "example:sre", "--edit", edit)
        assert out.returncode == 2
        assert _error_line(out.stderr) == (f"agentlog: error: --edit {edit}: run sre-0001 seq {named.seq} is "
                                           f"{'an' if named.type.startswith('llm') else 'a'} {named.type}, "
                                           f"not {wanted}")
    exported = tmp_path / "sre.jsonl"
    assert cli("--store", samples, "export", "sre-0001", "-o", exported).returncode == 0
    header, *events = exported.read_text().splitlines()
    count = json.loads(header)["count"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([json.dumps({**json.loads(header), "count": str(count)}), *events]) + "\n")
    out = cli("--store", samples, "import", bad, "--format", "jsonl")
    assert out.returncode == 2
    assert _error_line(out.stderr) == f"agentlog: error: {bad}:1: field count: must be an integer, got '{count}'"
