"""The store: where it is, what it lists, how runs are found and opened."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from _store_helpers import FixedClock, make_run

import agentlog
from agentlog.errors import AmbiguousRunError, RunNotFoundError, StorePathError
from agentlog.store import Run, Store
from agentlog.store import open as open_run


def test_default_path_from_env_or_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOG_STORE", str(tmp_path / "env-store"))
    assert Store().path == tmp_path / "env-store"
    monkeypatch.delenv("AGENTLOG_STORE")
    monkeypatch.chdir(tmp_path)
    assert Store().path == tmp_path / "agentlog-runs"


def test_a_file_is_not_a_store(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StorePathError) as info:
        Store(f)
    assert isinstance(info.value, NotADirectoryError)
    assert str(info.value) == f"{f}: a store must be a directory, and this is a file"


def test_reading_a_missing_store_leaves_no_trace(tmp_path: Path) -> None:
    st = Store(tmp_path / "nothing")
    assert st.list_runs() == [] and list(st.blobs) == [] and "x" not in st
    assert st.verify(progress=False) == {}
    assert st.gc().blobs == 0
    with pytest.raises(RunNotFoundError):
        st.run("x")
    assert repr(st) == f"<Store {tmp_path / 'nothing'}>"
    assert list(tmp_path.iterdir()) == []


def test_list_runs_by_creation_time_then_id(store: Store) -> None:
    for run_id, start in [("c", 3.0), ("b", 1.0), ("a", 3.0), ("z", 2.0)]:
        make_run(store, 1, run_id=run_id, clock=FixedClock(1_796_241_648.0 + start))
    (store.runs_path / "not-a-run").mkdir()
    (store.runs_path / "run_id=empty").mkdir()  # no run.json: a damaged run, listed first
    assert store.list_runs() == ["empty", "b", "z", "a", "c"]


def test_run_by_id_or_unique_prefix(store: Store) -> None:
    for run_id in ["20261202-aaaa", "20261202-aabb", "20261203-cccc"]:
        make_run(store, 1, run_id=run_id)
    assert store.run("20261203").id == "20261203-cccc"
    assert store.run("20261202-aabb").id == "20261202-aabb"
    with pytest.raises(AmbiguousRunError) as info:
        store.run("20261202-aa")
    assert str(info.value) == ("run prefix '20261202-aa' matches 2 runs (20261202-aaaa, 20261202-aabb); "
                               "give more characters")
    with pytest.raises(RunNotFoundError) as info2:
        store.run("2027")
    assert str(info2.value) == f"no run '2027' in store {store.path}; agentlog ls lists the runs"
    for weird in ["../runs", "", "run_id=x", "a/b"]:
        with pytest.raises(RunNotFoundError):
            store.run(weird)


def test_open_a_run_dir_a_store_and_id_or_an_id(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    make_run(store, 2, run_id="only")
    run_dir = store.runs_path / "run_id=only"
    assert open_run(run_dir).id == "only"
    assert open_run(str(store.path), "only").id == "only"
    assert open_run(store.path).id == "only"  # the store has one run
    monkeypatch.setenv("AGENTLOG_STORE", str(store.path))
    assert open_run("on").id == "only"
    assert agentlog.open(run_dir).id == "only"
    make_run(store, 1, run_id="other")
    with pytest.raises(ValueError, match="holds 2 runs"):
        open_run(store.path)


def test_run_repr_is_cheap(store: Store) -> None:
    make_run(store, 1204, run_id="3f2a9c1b", name="triage")
    run = store.run("3f2a")
    assert repr(run) == "<Run 3f2a9c1b 'triage' 1,204 events closed>"  # from run.json
    assert run._snap is None
    w = make_run(store, 3, run_id="live", close=False)
    live = store.run("live")
    assert repr(live) == "<Run live not read yet open>"
    len(live)
    assert repr(live) == "<Run live 3 events open>"
    w.close()


def test_run_attributes(store: Store) -> None:
    make_run(store, 3, run_id="attrs", name="n", tags={"team": "x"})
    run = store.run("attrs")
    assert isinstance(run, Run)
    assert (run.id, run.name, run.status, run.parent, run.fork_seq) == ("attrs", "n", "closed", None, None)
    assert run.path == store.runs_path / "run_id=attrs"
    assert run.meta["tags"] == {"team": "x"}
    assert run.refresh() is run


def test_verify_all_runs_with_progress_bar(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    make_run(store, 3, run_id="v1")
    make_run(store, 3, run_id="v2")
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    reports = store.verify()  # stderr is not a terminal: no bar
    assert err.getvalue() == ""
    assert list(reports) == ["v1", "v2"] and all(r.ok for r in reports.values())
    store.verify(progress=True)
    assert "verify" in err.getvalue() and "2/2" in err.getvalue()


def test_public_names_are_exported() -> None:
    for name in ["Store", "Run", "RunWriter", "BlobStore", "VerifyReport", "GCReport", "Durability",
                 "TornWALWarning", "open"]:
        assert getattr(agentlog, name) is getattr(__import__("agentlog.store", fromlist=[name]), name)
