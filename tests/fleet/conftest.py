"""A real S3 API on loopback (moto's server, in a subprocess) for the remote-store tests."""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
          "AWS_DEFAULT_REGION": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _serving(argv: Callable[[int], list[str]], what: str) -> Iterator[str]:
    """Run ``python <argv(port)>`` on a free port, wait until it accepts connections on
    127.0.0.1, yield its URL, and stop it afterwards."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, *argv(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server started for this session."""
    with _serving(lambda port: ["-c", "from moto.server import main; main()", "-p", str(port)],
                  "the moto S3 server") as url:
        yield url


@pytest.fixture(scope="session")
def s3_vars(s3_endpoint: str) -> dict[str, str]:
    """The standard AWS environment variables that point at the server."""
    return dict(S3_ENV, AWS_ENDPOINT_URL=s3_endpoint)


@pytest.fixture
def s3_env(s3_vars: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The standard AWS environment pointing at the server (for this process and children)."""
    env = dict(s3_vars)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def bucket(s3_env: dict[str, str]) -> str:
    """``s3://<a new bucket>``."""
    import s3fs

    name = "team-" + secrets.token_hex(4)
    fs = s3fs.S3FileSystem(endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    fs.mkdir(name)
    return f"s3://{name}"


# --- Google Cloud Storage: gcp-storage-emulator (a pure-Python GCS JSON API server) -------------


@pytest.fixture(scope="session")
def gcs_endpoint() -> Iterator[str]:
    """The URL of a gcp-storage-emulator server (in memory) started for this session."""
    with _serving(lambda port: ["-m", "gcp_storage_emulator", "start", "--port", str(port),
                                "--host", "127.0.0.1", "--in-memory", "--quiet"],
                  "the GCS emulator") as url:
        yield url


@pytest.fixture
def gcs_env(gcs_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """gcsfs's standard environment pointing at the emulator: ``STORAGE_EMULATOR_HOST``; and
    gcsfs's plain JSON-API filesystem (its default one first asks a gRPC control plane, which
    no emulator serves, for each bucket's layout: a minute's timeout per bucket)."""
    env = {"STORAGE_EMULATOR_HOST": gcs_endpoint, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    import gcsfs
    import gcsfs.core
    if gcsfs.GCSFileSystem is not gcsfs.core.GCSFileSystem:  # imported before the variable was set
        pytest.fail("gcsfs was imported with its experimental filesystem before this fixture ran")
    return env


@pytest.fixture
def gcs_bucket(gcs_env: dict[str, str]) -> str:
    """``gs://<a new bucket>`` on the emulator."""
    import gcsfs

    name = "team-" + secrets.token_hex(4)
    gcsfs.GCSFileSystem(token="anon").mkdir(name)
    return f"gs://{name}"


@pytest.fixture(params=["s3", "gcs"])
def any_bucket(request: pytest.FixtureRequest) -> str:
    """A new bucket on each remote the tests serve: ``s3://…`` on moto, ``gs://…`` on the
    GCS emulator."""
    return str(request.getfixturevalue("bucket" if request.param == "s3" else "gcs_bucket"))


@pytest.fixture
def another_machine(any_bucket: str) -> Any:
    """A filesystem for ``any_bucket`` that shares no listing cache with this process's: what
    another machine writing into the same bucket would use."""
    if any_bucket.startswith("s3://"):
        import s3fs
        return s3fs.S3FileSystem(endpoint_url=os.environ["AWS_ENDPOINT_URL"], skip_instance_cache=True)
    import gcsfs
    return gcsfs.GCSFileSystem(token="anon", skip_instance_cache=True)
