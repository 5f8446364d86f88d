"""Commands that mend and prove: ``repair``, ``keygen``, ``sign``, ``prove``, ``verify-proof``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ._app import cli
from ._util import (
    ExitCode,
    echo_json,
    existing_file,
    existing_store,
    fail,
    open_run,
    output_file,
    writing,
)

__all__ = ["public_key_arg", "read_head_arg"]

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
OUTPUT_OPTION = click.option("-o", "--output", metavar="FILE", help="Write the JSON here instead of stdout.")


@cli.command("repair")
@click.argument("run")
@JSON_OPTION
def repair_command(run: str, as_json: bool) -> None:
    """Rebuild RUN's lost or damaged run.json from its segments and WAL.

    RUN is the exact run id (or the run folder). The count, head, fork parent and times come
    from the events; what only run.json knew (name, tags, writer settings, how a closed run
    ended) is marked unknown unless the damaged file still holds it; that file is kept as
    run.json.damaged-<n>. A run whose run.json is fine is left alone.
    """
    from ..store.meta import run_id_of
    from ..store.store import Store

    folder = Path(run).expanduser()
    rid = run_id_of(folder.name) if folder.is_dir() else None
    store = existing_store() if rid is None else Store(folder.resolve().parent.parent)
    report = store.repair(rid or run)
    if as_json:
        parent = None if report.parent is None else {"run_id": report.parent[0], "seq": report.parent[1]}
        echo_json({"run_id": report.run_id, "repaired": report.repaired, "events": report.events,
                   "head": report.head, "status": report.status, "parent": parent,
                   "unknown": list(report.unknown), "inferred": list(report.inferred),
                   "kept": report.kept})
        return
    click.echo(str(report))


# --- keys and signed heads -------------------------------------------------------------------


@cli.command("keygen")
@click.argument("key_file", metavar="KEY")
def keygen_command(key_file: str) -> None:
    """Make a new ed25519 signing key in KEY (PEM, readable by you only); print its public key.

    Keep KEY where the store's writers cannot read it if a head must hold against them; give
    the public key to whoever verifies (agentlog verify-proof --public-key).
    """
    from ..store.heads import generate_key

    path = output_file(key_file)
    if path.exists():
        fail(ExitCode.BAD_INPUT, f"{key_file} exists; a key is never overwritten")
    with writing(path):
        public = generate_key(path)
    click.echo(public)


@cli.command("sign")
@click.argument("run")
@click.option("--key", "key_file", metavar="KEY", envvar="AGENTLOG_SIGNING_KEY", show_envvar=True,
              required=True, help="The ed25519 private key (PEM).")
@OUTPUT_OPTION
def sign_command(run: str, key_file: str, output: str | None) -> None:
    """Sign RUN as it is now: a signed head of its size, Merkle root and chain head.

    Keep the head outside the store (a ticket, a CI artifact, an email): later,
    `agentlog verify RUN --expect-head FILE` detects a cut tail or a rewritten history, and
    `agentlog prove RUN --consistency FILE` proves the run only grew since.
    """
    from ..store.heads import sign_head

    head = sign_head(open_run(run), existing_file(key_file))
    _emit(head.to_json(), output)


@cli.command("prove")
@click.argument("run")
@click.argument("seq", type=int, required=False)
@click.option("--consistency", "old_head", metavar="OLD_HEAD",
              help="A signed head of RUN from earlier: prove RUN extends it.")
@click.option("--head", "head_file", metavar="HEAD",
              help="Inclusion: prove SEQ under this signed head (its size), and embed it.")
@click.option("--key", "key_file", metavar="KEY", help="Consistency: also sign the new head with KEY.")
@OUTPUT_OPTION
def prove_command(run: str, seq: int | None, old_head: str | None, head_file: str | None,
                  key_file: str | None, output: str | None) -> None:
    """Prove event SEQ is in RUN (inclusion), or that RUN extends OLD_HEAD (--consistency).

    The proof is a small JSON document that `agentlog verify-proof` (or
    agentlog.proofs.verify_proof) checks without the store.
    """
    from ..store.heads import prove_consistency, prove_inclusion

    if (seq is None) == (old_head is None):
        fail(ExitCode.BAD_INPUT, "prove: give SEQ (inclusion) or --consistency OLD_HEAD, not both")
    r = open_run(run)
    doc: Any
    if old_head is not None:
        if head_file is not None:
            fail(ExitCode.BAD_INPUT, "--head is for inclusion proofs; a consistency proof starts from --consistency")
        doc = prove_consistency(r, read_head_arg(old_head), key=None if key_file is None else existing_file(key_file))
    else:
        assert seq is not None
        if key_file is not None:
            fail(ExitCode.BAD_INPUT, "--key is for consistency proofs; sign a head with agentlog sign")
        doc = prove_inclusion(r, seq, head=None if head_file is None else read_head_arg(head_file))
    _emit(doc.to_json(), output)


@cli.command("verify-proof")
@click.argument("proof_file", metavar="FILE")
@click.option("--public-key", "public_key", metavar="KEY",
              help="Require signatures by this key: a PEM file, or the base64 that keygen printed.")
@JSON_OPTION
def verify_proof_command(proof_file: str, public_key: str | None, as_json: bool) -> None:
    """Check a signed head, inclusion proof or consistency proof in FILE, without the store.

    Exits 0 if every hash and signature checks, 1 if not.
    """
    from ..proofs import read_document, verify_proof

    path = existing_file(proof_file)
    try:
        doc = json.loads(path.read_bytes())
    except ValueError as exc:
        fail(ExitCode.BAD_INPUT, f"{proof_file}: not JSON ({exc})")
    check = verify_proof(read_document(doc, proof_file), public_key=public_key_arg(public_key))
    if as_json:
        echo_json({"ok": check.ok, "kind": check.kind, "proves": check.proves,
                   "signers": list(check.signers), "pinned": check.pinned, "problems": list(check.problems)})
    else:
        click.echo(str(check))
    if not check.ok:
        raise click.exceptions.Exit(int(ExitCode.CHECK_FAILED))


# --- shared --------------------------------------------------------------------------------------


def read_head_arg(value: str) -> Any:
    """A signed head from a file given on the command line (exit 2 if it is not one)."""
    from ..store.heads import read_signed_head
    return read_signed_head(existing_file(value))


def public_key_arg(value: str | None) -> str | None:
    """``--public-key``: the text of a file (PEM or base64), or the value itself."""
    if value is None:
        return None
    path = Path(value).expanduser()
    if path.is_file():
        return path.read_text(encoding="utf-8", errors="replace")
    return value


def _emit(doc: dict[str, Any], output: str | None) -> None:
    text = json.dumps(doc, indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    dest = output_file(output)
    with writing(dest):
        dest.write_text(text, encoding="utf-8")
    click.echo(f"wrote {dest}", err=True)
