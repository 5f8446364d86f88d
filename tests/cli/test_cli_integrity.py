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


def test_a_signed_head_kept_elsewhere_catches_what_verify_alone_cannot(cli: Cli, samples: Path,
                                                                        tmp_path: Path) -> None:
    keys = tmp_path / "keys"  # outside the store
    keys.mkdir()
    out = cli("keygen", keys / "key.pem")
    assert out.returncode == 0, out.stderr
    pub = out.stdout.strip()
    assert len(pub) == 44 and (keys / "key.pem").stat().st_mode & 0o777 == 0o600
    assert cli("keygen", keys / "key.pem").returncode == 2  # never overwritten

    head = keys / "sre-0001.head.json"
    out = cli("sign", "sre-0001", "--key", keys / "key.pem", "-o", head, "--store", samples)
    assert out.returncode == 0, out.stderr
    assert json.loads(head.read_text())["size"] == 78

    out = cli("verify", "sre-0001", "--expect-head", head, "--public-key", pub, "--store", samples)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "holds the 78 events signed at" in out.stdout and "(pinned)" in out.stdout

    out = cli("prove", "sre-0001", "12", "--head", head, "-o", keys / "inc.json", "--store", samples)
    assert out.returncode == 0, out.stderr
    out = cli("verify-proof", keys / "inc.json", "--public-key", pub)
    assert out.returncode == 0 and out.stdout.startswith("ok: event seq 12"), out.stdout
    out = cli("prove", "sre-0001", "--consistency", head, "--key", keys / "key.pem", "--store", samples)
    assert out.returncode == 0 and json.loads(out.stdout)["agentlog"] == "consistency-proof"

    # someone who can write the store cuts the tail and makes run.json agree: the chain holds
    import agentlog as al
    run = al.Store(samples).run("sre-0001")
    (run.path / "events-000000000065.parquet").unlink()  # seqs 65..77
    meta = json.loads((run.path / "run.json").read_text())
    meta.update(count=65, head=run.event(64).hash)
    (run.path / "run.json").write_text(json.dumps(meta))
    assert cli("verify", "sre-0001", "--store", samples).returncode == 0  # alone: fooled
    out = cli("verify", "sre-0001", "--expect-head", head, "--store", samples)
    assert out.returncode == 1 and "seqs 65–77 were cut" in out.stdout

    inc = json.loads((keys / "inc.json").read_text())
    inc["size"] = 73
    (keys / "inc-forged.json").write_text(json.dumps(inc))
    out = cli("verify-proof", keys / "inc-forged.json")
    assert out.returncode == 1 and out.stdout.startswith("NOT OK")
    out = cli("verify-proof", keys / "key.pem")
    assert out.returncode == 2 and "not JSON" in out.stderr
