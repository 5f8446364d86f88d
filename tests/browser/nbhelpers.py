"""Helpers for browser tests: Chromium settings and a server runner that stops by PID."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")  # Debian package `chromium`
# Without the networking flags Chromium keeps trying to reach Google services on a closed network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
TOKEN = "test-token"
ROOT_FLAG = ["--allow-root"] if os.geteuid() == 0 else []  # jupyter lab refuses root without it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(cmd: list[str], ready_url: str, log_path: Path, env: dict[str, str] | None = None,
          timeout: float = 120) -> Iterator[subprocess.Popen[bytes]]:
    """Start a server; return once ``ready_url`` answers at all; on exit SIGTERM it by PID."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, f"server exited early, see {log_path}"
            assert time.monotonic() < deadline, f"server not ready, see {log_path}"
            try:
                urllib.request.urlopen(ready_url, timeout=2).close()
                break
            except urllib.error.HTTPError:
                break  # 403/404 still means it is listening
            except OSError:
                time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()  # jupyter servers shut their kernels down on SIGTERM
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
