"""The blob folder: content addressing, integrity, no traversal, dedup across runs and processes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from _store_helpers import PYTHON, child_env, du, sha

from agentlog.errors import BlobIntegrityError, BlobNotFoundError, InvalidBlobRefError
from agentlog.store import BlobStore, Store


def test_put_read_exists_path_iter(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "blobs")
    assert list(blobs) == [] and not (tmp_path / "blobs").exists()
    ref = blobs.put(b"hello bytes")
    text_ref = blobs.put("héllo", "text/markdown")
    assert ref.digest == sha(b"hello bytes") and ref.size == 11
    assert ref.media_type == "application/octet-stream"
    assert (text_ref.media_type, text_ref.size) == ("text/markdown", 6)
    path = blobs.path(ref.digest)
    assert path == tmp_path / "blobs" / "sha256" / ref.hex[:2] / ref.hex[2:]
    assert path.read_bytes() == b"hello bytes"
    assert blobs.exists(ref.digest) and not blobs.exists(sha(b"other"))
    assert blobs.read(ref.digest) == b"hello bytes" == ref.read_bytes()
    assert sorted(blobs) == sorted([ref.digest, text_ref.digest])


def test_put_is_idempotent(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "blobs")
    a, b = blobs.put(b"same"), blobs.put(b"same")
    assert a == b and len(list(blobs)) == 1
    assert [p.name for p in blobs.path(a.digest).parent.iterdir()] == [a.hex[2:]]


def test_read_checks_the_hash(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "blobs")
    ref = blobs.put(b"original")
    blobs.path(ref.digest).write_bytes(b"0riginal")
    with pytest.raises(BlobIntegrityError) as info:
        blobs.read(ref.digest)
    assert info.value.digest == ref.digest and info.value.actual == sha(b"0riginal")[7:]
    missing = sha(b"nope")
    with pytest.raises(BlobNotFoundError) as info2:
        blobs.read(missing)
    assert isinstance(info2.value, FileNotFoundError)
    assert str(info2.value) == f"blob {missing} is missing ({blobs.path(missing)})"


@pytest.mark.parametrize("digest", ["sha256:../../x", "sha256:" + "A" * 64, "md5:" + "a" * 64,
                                    "sha256:" + "a" * 63 + "/", "sha256:" + "a" * 65, 42])
def test_no_path_outside_the_blob_folder(tmp_path: Path, digest: object) -> None:
    blobs = BlobStore(tmp_path / "blobs")
    for call in (blobs.path, blobs.exists, blobs.read):
        with pytest.raises(InvalidBlobRefError):
            call(digest)  # type: ignore[arg-type]


def test_ten_megabytes_referenced_twenty_times_in_three_runs_is_stored_once(store: Store) -> None:
    page = bytes(range(256)) * (10 * 4096)  # 10 MiB
    refs = set()
    for r in range(3):
        with store.create_run(run_id=f"dedup-{r}") as w:
            for i in range(7 if r < 2 else 6):
                refs.add(w.emit("note", {"page": page, "i": i}).payload["page"])
    assert len(refs) == 1
    blob_bytes = du(store.path / "blobs")
    assert blob_bytes == len(page)
    total = du(store.path)
    assert len(page) <= total < len(page) + 64 * 1024  # the runs themselves are tiny
    assert all(r.ok for r in store.verify(progress=False).values())
    assert sum(len(store.run(f"dedup-{r}")) for r in range(3)) == 20


_SAME_BLOB = """
import sys
from agentlog.store import Store
st = Store(sys.argv[1])
data = (b"shared-" * 200_000)
for i in range(20):
    st.blobs.put(data)
    st.blobs.put(data + bytes([i % 3]))
print("ok")
"""


def test_several_processes_write_the_same_blobs(store: Store) -> None:
    procs = [subprocess.Popen([PYTHON, "-c", _SAME_BLOB, str(store.path)], env=child_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
        assert out.strip() == b"ok"
    data = b"shared-" * 200_000
    expected = {sha(data), *(sha(data + bytes([i])) for i in range(3))}
    assert set(store.blobs) == expected
    for digest in expected:
        store.blobs.read(digest)  # checks the hash
    leftovers = [p for p in (store.path / "blobs").rglob("*") if p.is_file() and p.name.startswith(".")]
    assert leftovers == []


@pytest.mark.parametrize("unnamed", [True, False], ids=["unnamed file", "temp file and rename"])
@pytest.mark.parametrize("durable", [True, False])
def test_a_new_blob_appears_whole_and_leaves_nothing_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               unnamed: bool, durable: bool) -> None:
    from agentlog.store import _fs
    if unnamed and not _fs._unnamed[0]:
        pytest.fail("this Linux has no O_TMPFILE: the fast path is not exercised")
    monkeypatch.setattr(_fs, "_unnamed", [unnamed])
    blobs = BlobStore(tmp_path / "blobs")
    data = bytes(range(256)) * 4000  # 1 MB: more than one write() may take
    ref = blobs.put(data, durable=durable)
    path = blobs.path(ref.digest)
    assert path.read_bytes() == data and blobs.read(ref.digest) == data
    assert [p.name for p in path.parent.iterdir()] == [ref.hex[2:]]  # no temp file left
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o644 & ~umask  # as a file made by open() is


def test_a_blob_another_writer_stored_first_stays(tmp_path: Path) -> None:
    from agentlog.store._fs import write_new
    target = tmp_path / "blob"
    target.write_bytes(b"first")
    write_new(str(target), b"second")  # same name, so the same bytes for a real blob: the first stays
    assert target.read_bytes() == b"first" and [p.name for p in tmp_path.iterdir()] == ["blob"]
    with pytest.raises(FileNotFoundError):
        write_new(str(tmp_path / "no-folder" / "blob"), b"x")


def test_a_new_store_makes_its_blob_folders_once_and_fsyncs_their_names_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlog.store import blobs as blobs_module
    synced: list[Path] = []
    real = blobs_module.fsync_dir
    monkeypatch.setattr(blobs_module, "fsync_dir", lambda path: (synced.append(Path(path)), real(path))[1])
    made: list[str] = []
    real_mkdir = os.mkdir
    monkeypatch.setattr(os, "mkdir", lambda path, *a, **k: (made.append(os.fspath(path)), real_mkdir(path, *a, **k))[1])
    blobs = BlobStore(tmp_path / "store" / "blobs")
    first = blobs.put(b"a")
    sha256 = tmp_path / "store" / "blobs" / "sha256"
    # The first blob makes every <2 hex> folder, and fsyncs each new name once: all of them
    # in sha256/ with one fsync, then sha256/ and blobs/ themselves in their parents.
    assert sorted(p.name for p in sha256.iterdir()) == [f"{i:02x}" for i in range(256)]
    assert synced == [sha256, tmp_path / "store" / "blobs", tmp_path / "store"]
    folders_made = len(made)
    others = [blobs.put(bytes([i])) for i in range(1, 64)]
    assert {ref.hex[:2] for ref in others} - {first.hex[:2]}  # other folders than the first's
    assert len(made) == folders_made and synced == [sha256, tmp_path / "store" / "blobs", tmp_path / "store"]
    assert all(blobs.read(ref.digest) == bytes([i]) for i, ref in enumerate(others, 1))
    # Another process (another BlobStore) finds the folders with one listing: nothing is made.
    again = BlobStore(tmp_path / "store" / "blobs")
    again.put(b"from elsewhere")
    assert len(made) == folders_made and len(synced) == 3


@pytest.mark.parametrize("durable", [True, False])
def test_a_blob_whose_folder_was_removed_is_still_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          durable: bool) -> None:
    import shutil

    from agentlog.store import blobs as blobs_module
    synced: list[Path] = []
    real = blobs_module.fsync_dir
    monkeypatch.setattr(blobs_module, "fsync_dir", lambda path: (synced.append(Path(path)), real(path))[1])
    blobs = BlobStore(tmp_path / "store" / "blobs")
    first = blobs.put(b"first", durable=durable)
    sha256 = tmp_path / "store" / "blobs" / "sha256"
    shutil.rmtree(blobs.path(first.digest).parent)  # its folder removed while the process runs
    synced.clear()
    again = blobs.put(b"first", durable=durable)
    assert again == first and blobs.read(first.digest) == b"first"
    assert synced == ([sha256] if durable else [])  # the folder's name made durable again
    shutil.rmtree(tmp_path / "store" / "blobs")  # the whole blob folder too
    synced.clear()
    other = blobs.put(b"second", durable=durable)
    assert blobs.read(other.digest) == b"second" and sorted(blobs) == [other.digest]
    assert len(list(sha256.iterdir())) == 256
    # sha256/ and blobs/ are new names again: their parents are fsynced again
    assert synced == ([sha256, tmp_path / "store" / "blobs", tmp_path / "store"] if durable else [])
