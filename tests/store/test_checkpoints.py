"""Fold checkpoints: derived data that gives the same states as the log, checked before use."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agentlog.errors import CheckpointError, CheckpointWarning
from agentlog.events import Event
from agentlog.folding import Reducers, fold, same_value, thaw
from agentlog.redact import DEFAULT
from agentlog.store import Store
from agentlog.store.checkpoints import build_checkpoints, list_checkpoints
from agentlog.testing.strategies import docs_and_patches

STANDARD = Reducers.standard()


def patch_run(store: Store, run_id: str, batches: list[list[dict[str, Any]]], segment_events: int = 7) -> Any:
    w = store.create_run(run_id=run_id, durability="none", segment_events=segment_events)
    for ops in batches:
        w.emit("state.patch", {"ops": ops})
    w.close()
    return store.run(run_id)


def growing(n: int) -> list[list[dict[str, Any]]]:
    batches: list[list[dict[str, Any]]] = [[{"op": "add", "path": "/notes", "value": {}},
                                            {"op": "add", "path": "/log", "value": []}]]
    for i in range(1, n):
        batches.append([{"op": "add", "path": f"/notes/n{i:05d}", "value": {"text": f"note {i}" * 3, "i": i}},
                        {"op": "add", "path": "/log/-", "value": i}])
    return batches


def events_of(run: Any) -> list[Event]:
    return list(run.iter_events())


@settings(max_examples=25, deadline=None)
@given(cases=st.lists(docs_and_patches(max_ops=6), min_size=1, max_size=3),
       spacing=st.integers(min_value=1, max_value=9))
def test_every_checkpoint_gives_the_state_folded_from_zero(tmp_path_factory: Any, cases: Any,
                                                          spacing: int) -> None:
    batches: list[list[dict[str, Any]]] = []
    for doc, ops in cases:  # each stretch starts from a document of its own
        batches += [[{"op": "replace", "path": "", "value": doc}]] + [[op] for op in ops]
    # the writer redacts a value under a credential's name ("cookie"): a later "test" op of
    # that value would then fail in any fold, from a checkpoint or from zero
    assume(not DEFAULT.finds({"batches": batches}))
    store = Store(tmp_path_factory.mktemp("ck"))
    run = patch_run(store, "r", batches)
    events = events_of(run)
    build_checkpoints(run, STANDARD, every=spacing)
    found = list_checkpoints(run.path)
    assert [c.seq for c in found][-1] == len(events) - 1
    fresh = Store(store.path).run("r")
    for n in range(-1, len(events)):
        expected = fold(events[:n + 1], STANDARD)
        assert same_value(fresh.state_at(n, reducers=STANDARD), expected), n


def test_a_fresh_process_starts_from_the_nearest_checkpoint(tmp_path: Path) -> None:
    store = Store(tmp_path)
    run = patch_run(store, "g", growing(300))
    build_checkpoints(run, STANDARD, every=100)
    assert [c.seq for c in list_checkpoints(run.path)] == [99, 199, 299]
    fresh = Store(tmp_path).run("g")
    read: list[tuple[int, int]] = []
    real = fresh._iter_events

    def counting(start: int, stop: int | None, *, light: bool) -> Any:
        read.append((start, stop))
        return real(start, stop, light=light)

    fresh._iter_events = counting  # type: ignore[method-assign]
    state = fresh.state_at(250, reducers=STANDARD)
    # the events after the checkpoint at 199, not the whole run (199's hash is read from the
    # hash column, not as an event)
    assert read == [(200, 251)]
    assert thaw(state) == thaw(fold(events_of(run)[:251], STANDARD))


def test_consecutive_checkpoints_share_nodes_on_disk(tmp_path: Path) -> None:
    store = Store(tmp_path)
    run = patch_run(store, "g", growing(2000))
    build_checkpoints(run, STANDARD, every=1000)
    packs = sorted((run.path / "checkpoints").glob("nodes-*.pack"))
    assert len(packs) == 2
    _, second = (p.stat().st_size for p in packs)
    # the second adds ~1,000 notes to ~1,000: it writes what changed, not the whole state again
    alone = Store(tmp_path / "alone")
    whole = patch_run(alone, "w", growing(2000))
    build_checkpoints(whole, STANDARD, every=2000)
    (pack,) = (whole.path / "checkpoints").glob("nodes-*.pack")
    assert second < 0.7 * pack.stat().st_size
    last = list_checkpoints(run.path)[-1]
    assert {Path(p).name for p, _, _ in last.packs} == {p.name for p in packs}  # it references the first


def test_a_tampered_pack_is_detected_and_ignored(tmp_path: Path) -> None:
    store = Store(tmp_path)
    run = patch_run(store, "g", growing(300))
    build_checkpoints(run, STANDARD, every=100)
    pack = max((run.path / "checkpoints").glob("nodes-*.pack"))
    data = bytearray(pack.read_bytes())
    data[len(data) // 2] ^= 0x01
    pack.write_bytes(bytes(data))
    fresh = Store(tmp_path).run("g")
    with pytest.warns(CheckpointWarning, match="differ from what its manifest recorded"):
        state = fresh.state_at(299, reducers=STANDARD)
    assert thaw(state) == thaw(fold(events_of(run), STANDARD))


def test_changing_the_reducers_or_the_log_makes_checkpoints_stale(tmp_path: Path) -> None:
    store = Store(tmp_path)
    run = patch_run(store, "g", growing(50))
    build_checkpoints(run, STANDARD, every=10)
    mine = STANDARD.with_reducer("state.patch", lambda state, event: state.set("seen", True))
    fresh = Store(tmp_path).run("g")
    assert fresh.state_at(49, reducers=mine)["seen"] is True  # folded from the log, not the checkpoint
    assert mine.fingerprint() != STANDARD.fingerprint()
    # a checkpoint that names another chain hash than the log's is never used
    manifest = list_checkpoints(run.path)[-1].path
    manifest.write_text(manifest.read_text().replace(run.event(49).hash, "0" * 64))
    stale = Store(tmp_path).run("g")
    read: list[Any] = []
    real = stale._iter_events
    stale._iter_events = (  # type: ignore[method-assign]
        lambda start, stop, *, light: read.append((start, stop)) or real(start, stop, light=light))
    assert thaw(stale.state_at(49, reducers=STANDARD)) == thaw(fold(events_of(run), STANDARD))
    assert read == [(40, 50)]  # 49's hash differs: the checkpoint at 39 instead


def test_deleting_every_checkpoint_loses_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path)
    run = patch_run(store, "g", growing(40))
    build_checkpoints(run, STANDARD, every=10)
    for f in (run.path / "checkpoints").iterdir():
        f.unlink()
    assert thaw(Store(tmp_path).run("g").state_at(39)) == thaw(fold(events_of(run)))


KILLER = r"""
import os, sys
from agentlog.store import Store
from agentlog.folding import Reducers
from agentlog.store import checkpoints
store = Store(sys.argv[1])
run = store.run("g")
real = checkpoints._PackSink.finish
def dying(self, durable):
    self.file.flush()
    os._exit(9)  # killed after the nodes went out, before the pack is renamed
checkpoints._PackSink.finish = dying
checkpoints.build_checkpoints(run, Reducers.standard(), every=10, rebuild=True)
"""


def test_a_writer_killed_mid_write_leaves_nothing_half_read(tmp_path: Path) -> None:
    store = Store(tmp_path)
    run = patch_run(store, "g", growing(30))
    proc = subprocess.run([sys.executable, "-c", KILLER, str(tmp_path)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 9, proc.stderr
    folder = run.path / "checkpoints"
    assert not list(folder.glob("ckpt-*.json")) and not list(folder.glob("nodes-*.pack"))
    assert any(name.startswith(".") for name in os.listdir(folder))  # only the temp file is left
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert thaw(Store(tmp_path).run("g").state_at(29)) == thaw(fold(events_of(run)))


def test_a_recording_checkpoints_at_its_seals_and_at_close(tmp_path: Path) -> None:
    import agentlog as al
    from agentlog.store.checkpoints import CLOSE_MIN

    n = CLOSE_MIN + 500

    def program(rec: Any) -> int:
        for i in range(n):
            rec.patch([{"op": "add", "path": f"/k{i % 300}", "value": i}])
        return n

    store = Store(tmp_path)
    w = store.create_run(run_id="rec", durability="none", segment_events=4000)
    from agentlog.capture.recorder import Recorder
    from agentlog.capture.session import drive
    from agentlog.capture.sinks import WriterSink
    drive(Recorder(WriterSink(w)), program)
    w.close()
    run = store.run("rec")
    # a checkpoint at the last event of each sealed segment, and one at close
    assert [c.seq for c in list_checkpoints(run.path)] == [3999, 7999, len(run) - 1]
    fresh = Store(tmp_path).run("rec")
    assert thaw(fresh.state_at(len(run) - 1)) == thaw(fold(events_of(run)))
    small = al.record(lambda rec: rec.patch([{"op": "add", "path": "/a", "value": 1}]) and None, store=store)
    assert not (small.path / "checkpoints").exists()  # a small run folds in milliseconds


def test_a_recording_checkpoints_once_per_stretch(tmp_path: Path) -> None:
    from agentlog.capture.recorder import Recorder
    from agentlog.capture.session import drive
    from agentlog.capture.sinks import WriterSink
    from agentlog.store.checkpoints import EVERY

    store = Store(tmp_path)
    w = store.create_run(run_id="rec", durability="none", segment_events=10 * EVERY)
    drive(Recorder(WriterSink(w)),
          lambda rec: [rec.patch([{"op": "add", "path": f"/k{i % 50}", "value": i}]) for i in range(EVERY + 100)] and 0)
    w.close()
    run = store.run("rec")
    # one at the end of the first stretch of EVERY events (not again at the event after it), one at close
    assert [c.seq for c in list_checkpoints(run.path)] == [EVERY - 1, len(run) - 1]


def test_the_checkpoint_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentlog.cli import main

    store = Store(tmp_path)
    patch_run(store, "g", growing(250))
    assert main(["--store", str(tmp_path), "checkpoint", "g", "--every", "100"]) == 0
    assert capsys.readouterr().out == "g: 3 checkpoints written; checkpoints at seq 99, 199, 249\n"
    assert main(["--store", str(tmp_path), "checkpoint", "g"]) == 0
    assert capsys.readouterr().out == "g: 0 checkpoints written; checkpoints at seq 99, 199, 249\n"
    assert main(["--store", str(tmp_path), "checkpoint", "nope"]) == 3


def entries_compared_between_parent_and_fork(root: Path, notes: int, monkeypatch: pytest.MonkeyPatch
                                             ) -> tuple[int, Any, Any]:
    from agentlog.folding import diff_states, persistent

    store = Store(root)
    parent = patch_run(store, "p", growing(notes), segment_events=100_000)
    build_checkpoints(parent, STANDARD, every=1000)
    w = store.create_run(run_id="f", durability="none", fork_of=("p", notes - 1))
    w.emit("state.patch", {"ops": [{"op": "replace", "path": "/notes/n01500/i", "value": -1}]})
    w.close()
    build_checkpoints(store.run("f"), STANDARD)
    a = Store(root).run("p").state_at(notes - 1, reducers=STANDARD)  # two store objects: no node
    b = Store(root).run("f").state_at(notes, reducers=STANDARD)      # object shared in memory
    seen: list[int] = []
    real = persistent._diff_entries

    def counting(xs: Any, ys: Any, out: Any) -> None:
        seen.append(sum(len(x) for x in xs) + sum(len(y) for y in ys))
        real(xs, ys, out)

    monkeypatch.setattr(persistent, "_diff_entries", counting)
    patch = diff_states(a, b)
    monkeypatch.undo()
    assert [op["path"] for op in patch] == ["/vars/notes/n01500/i"]
    return sum(seen), (a, b), patch


def test_a_parent_and_its_fork_diff_by_hash_across_processes(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """States read from checkpoints carry their nodes' digests: diff_states skips every subtree
    whose digest is the same on both sides, though no node object is shared: the entries it
    compares are those of the leaf that changed, whatever the size of the state."""
    from agentlog.folding import diff_states, freeze

    small, (a, b), patch = entries_compared_between_parent_and_fork(tmp_path / "s", 3000, monkeypatch)
    big, _, _ = entries_compared_between_parent_and_fork(tmp_path / "b", 12000, monkeypatch)
    assert small < 1000 and big < 1.5 * small  # 4x the state, not 4x the work
    assert diff_states(freeze(thaw(a)), freeze(thaw(b))) == patch  # the same as from scratch


def test_integers_past_64_bits_come_back_exact_from_a_checkpoint(tmp_path: Path) -> None:
    store = Store(tmp_path)
    values = {"big": 2**70, "low": -(2**63) - 1, "tiny": 1e-22, "digits": "1234567890123456789012"}
    run = patch_run(store, "b", [[{"op": "add", "path": f"/{k}", "value": v}] for k, v in values.items()])
    build_checkpoints(run, STANDARD, every=2)
    fresh = Store(tmp_path).run("b")
    assert fresh.event(0).payload["ops"][0]["value"] == 2**70  # the log too (orjson reads it as a float)
    state = fresh.state_at(len(values) - 1, reducers=STANDARD)
    assert thaw(state["vars"]) == values and type(state["vars"]["big"]) is int


def test_a_checkpoint_is_opened_without_reading_every_pack(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlog.store import checkpoints

    store = Store(tmp_path)
    run = patch_run(store, "g", growing(600))
    build_checkpoints(run, STANDARD, every=100)
    hashed: list[str] = []
    real = checkpoints.NodeReader.verify_pack

    def counting(self: Any, pack: str, sha256: str, size: int) -> None:
        hashed.append(pack)
        real(self, pack, sha256, size)

    monkeypatch.setattr(checkpoints.NodeReader, "verify_pack", counting)
    fresh = Store(tmp_path).run("g")
    state = fresh.state_at(599, reducers=STANDARD)
    assert state["vars"]["log"][-1] == 599 and len(state["vars"]["notes"]) == 599
    assert hashed == []  # nodes are checked by digest as they are read; no pack is hashed whole


@pytest.mark.parametrize("damage", ["truncate", "block table", "swap"])
def test_a_damaged_pack_is_never_used(tmp_path: Path, damage: str) -> None:
    store = Store(tmp_path)
    run = patch_run(store, "g", growing(300))
    build_checkpoints(run, STANDARD, every=100)
    packs = sorted((run.path / "checkpoints").glob("nodes-*.pack"))
    data = packs[-1].read_bytes()
    if damage == "truncate":
        packs[-1].write_bytes(data[:-30])
    elif damage == "block table":  # same size, the table's offsets moved
        assert b'"blocks":[[17,' in data  # the first block starts after the 17-byte magic line
        packs[-1].write_bytes(data.replace(b'"blocks":[[17,', b'"blocks":[[18,'))
    else:  # another checkpoint's pack in its place
        packs[-1].write_bytes(packs[0].read_bytes())
    with pytest.warns(CheckpointWarning, match="not used"):
        state = Store(tmp_path).run("g").state_at(299, reducers=STANDARD)
    assert thaw(state) == thaw(fold(events_of(run), STANDARD))


COLD_STATE_AT = r"""
import sys
import agentlog as al
state = al.Store(sys.argv[1]).run("r").state_at(int(sys.argv[2]))
print(state["vars"]["log"][-1])
print(",".join(sorted(name for name in ("pandas", "plotly", "ipywidgets", "duckdb", "httpx")
                      if name in sys.modules)))
"""


def test_a_cold_state_at_imports_no_table_plot_or_widget_library(tmp_path: Path) -> None:
    """The first ``state_at`` of a new process pays for pyarrow (the segments) and nothing
    above the store: pandas, plotly, ipywidgets, DuckDB and httpx stay unimported."""
    run = patch_run(Store(tmp_path), "r", growing(60), segment_events=16)
    build_checkpoints(run, STANDARD, every=16)
    out = subprocess.run([sys.executable, "-c", COLD_STATE_AT, str(tmp_path), "40"],
                         capture_output=True, text=True, check=True)
    last, imported = out.stdout.splitlines()
    assert int(last) == 40  # the state after event 40 really was read
    assert imported == ""


def test_a_manifest_records_one_pack_hash_and_the_other_packs_by_size(tmp_path: Path) -> None:
    """Format 2: each manifest hashes the pack it wrote; the packs before it are named with their
    sizes (the hashes of every earlier pack in every manifest made manifests grow with the run)."""
    import json

    run = patch_run(Store(tmp_path), "g", growing(600))
    build_checkpoints(run, STANDARD, every=100)
    packs = {p.name: p for p in (run.path / "checkpoints").glob("nodes-*.pack")}
    found = list_checkpoints(run.path)
    assert len(found) == 6 and len(found[-1].packs) == 6  # the last one's nodes are in all six packs
    for ckpt in found:
        doc = json.loads(ckpt.path.read_bytes())
        assert doc["agentlog_checkpoint"] == 2
        own = packs[Path(doc["pack"]["path"]).name]
        assert doc["pack"]["sha256"] == hashlib.sha256(own.read_bytes()).hexdigest()
        assert doc["pack"]["size"] == own.stat().st_size
        assert json.dumps(doc).count('"sha256"') == 1
        for path, sha, size in ckpt.packs:  # the sizes are the files' sizes
            assert size == packs[Path(path).name].stat().st_size
            assert sha == (doc["pack"]["sha256"] if path == doc["pack"]["path"] else None)
    sizes = [ckpt.path.stat().st_size for ckpt in found]
    assert sizes[-1] - sizes[0] < 5 * 48  # ~40 bytes more for each earlier pack, not ~170


def test_a_tampered_older_pack_is_detected_through_its_nodes_digests(tmp_path: Path) -> None:
    """The last manifest names the first pack by size alone: a changed byte in it is still caught
    by the digest of the node it is in, and the hash its own manifest recorded says why."""
    store = Store(tmp_path)
    run = patch_run(store, "g", growing(300))
    build_checkpoints(run, STANDARD, every=100)
    first = min((run.path / "checkpoints").glob("nodes-*.pack"))
    data = bytearray(first.read_bytes())
    for i in range(20, 60):  # the start of its one block: the first leaves (the last checkpoint's
        data[i] ^= 0x55      # first notes) or the block's tables; the end holds its own root
    first.write_bytes(bytes(data))
    fresh = Store(tmp_path).run("g")
    state = fresh.state_at(299, reducers=STANDARD)  # its root is in the last pack, intact
    with pytest.raises(CheckpointError, match="differ from what its manifest recorded"):
        thaw(state)  # the first notes are read from the first pack when they are looked at
    with pytest.warns(CheckpointWarning, match="not used"):  # then no checkpoint that needs it is
        again = fresh.state_at(298, reducers=STANDARD)
    assert thaw(again) == thaw(fold(events_of(run)[:299], STANDARD))


def test_a_checkpoint_of_the_first_format_is_ignored_and_replaced(tmp_path: Path) -> None:
    """Format 1 manifests (every pack with its SHA-256) are derived data of an older agentlog:
    never read, the state folded from the log, and replaced by ``build_checkpoints``."""
    import json

    store = Store(tmp_path)
    run = patch_run(store, "g", growing(50))
    build_checkpoints(run, STANDARD, every=10)
    for ckpt in list_checkpoints(run.path):  # rewrite each manifest as format 1 wrote it
        doc = json.loads(ckpt.path.read_bytes())
        doc["agentlog_checkpoint"] = 1
        doc["packs"] = [{"path": p, "sha256": hashlib.sha256((tmp_path / p).read_bytes()).hexdigest(),
                         "size": size} for p, _, size in ckpt.packs]
        del doc["pack"]
        ckpt.path.write_text(json.dumps(doc))
    assert list_checkpoints(run.path) == []
    old = Store(tmp_path).run("g")
    read: list[Any] = []
    real = old._iter_events
    old._iter_events = (  # type: ignore[method-assign]
        lambda start, stop, *, light: read.append((start, stop)) or real(start, stop, light=light))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ignored quietly: an old format is not damage
        assert thaw(old.state_at(49, reducers=STANDARD)) == thaw(fold(events_of(run), STANDARD))
    assert read == [(0, 50)]  # folded from the log
    build_checkpoints(Store(tmp_path).run("g"), STANDARD, every=10)
    assert [c.seq for c in list_checkpoints(run.path)] == [9, 19, 29, 39, 49]


def test_the_cli_builds_checkpoints_at_the_spacing_recordings_use() -> None:
    from agentlog.cli._checkpoint import checkpoint_command
    from agentlog.store.checkpoints import EVERY

    (every,) = [p for p in checkpoint_command.params if p.name == "every"]
    assert every.default == EVERY


def test_rebuilding_in_the_process_that_built_them_keeps_the_packs(tmp_path: Path) -> None:
    """A rebuild writes the same states: no node is new, so no pack is written, and the pack
    of the same name the first build wrote (which the new manifests reference) stays."""
    store = Store(tmp_path)
    run = patch_run(store, "g", growing(300))
    build_checkpoints(run, STANDARD, every=100)
    packs = sorted(p.name for p in (run.path / "checkpoints").glob("*.pack"))
    build_checkpoints(run, STANDARD, every=100, rebuild=True)
    assert sorted(p.name for p in (run.path / "checkpoints").glob("*.pack")) == packs
    fresh = Store(tmp_path).run("g")
    events = events_of(fresh)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        for n in (99, 150, 299):
            assert same_value(fresh.state_at(n, reducers=STANDARD), fold(events[:n + 1], STANDARD))
