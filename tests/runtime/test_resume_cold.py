"""A resume in a new process loads only what it uses, and still records what the run does.

The user waits for ``al.resume`` from ``import agentlog`` on: the HTTP layer (httpx, httpx2)
is imported only when the program imports it, and a program that imports it while it runs (a
tool of the resumed loop) is recorded all the same. Each case runs in a fresh interpreter, so
``sys.modules`` shows what the resume itself imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

# One agent, two phases in two processes: "start" runs it until it waits for an approval and
# approves it; "resume" resumes it and reports what it saw. The "stock" tool takes ``rec`` (it
# does its own I/O, recorded) and imports httpx only when it is called.
CHILD = r'''
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import agentlog as al

mode, store, http = sys.argv[1], sys.argv[2], sys.argv[3] == "http"


class Stock(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"sku": self.path.rsplit("/", 1)[-1], "left": 3}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Agent:
    name = "stock-agent"

    def next_step(self, state):
        if not state["approvals"]["decided"]:
            return al.RequestApproval({"check": "stock"}, reason="a person says when")
        if http and not state["tools"]:
            return al.CallTool("stock", {"sku": "A-7"})
        return al.Finish({"stock": state["tools"][-1]["result"] if state["tools"] else None})


seen = {}


def stock(sku, rec):
    seen["httpx_imported_before_the_tool"] = "httpx" in sys.modules
    import httpx
    return httpx.get(f"{URL}/{sku}").json()


server = ThreadingHTTPServer(("127.0.0.1", 0), Stock)
threading.Thread(target=server.serve_forever, daemon=True).start()
URL = f"http://127.0.0.1:{server.server_port}/stock"
tools = {"stock": stock}
if mode == "start":
    run = al.run_agent(Agent(), input={}, model=None, tools=tools, store=store, run_id="stock",
                       durability="none")
    assert run.status == "waiting", run.status
    al.approve("stock", len(run) - 2, "ops", store=store)
else:
    run = al.resume("stock", Agent(), model=None, tools=tools, store=store, durability="none")
    seen["status"] = run.status
    seen["types"] = [e.type for e in run.iter_events()]
    seen["result"] = run.event(len(run) - 1).payload["result"]
    seen["http_modules"] = sorted(m for m in sys.modules if m.split(".")[0] in ("httpx", "httpx2"))
    print(json.dumps(seen))
server.shutdown()
'''


def _child(mode: str, store: Path, http: bool) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(store), "http" if http else "none"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]) if mode == "resume" else {}


def test_a_resume_that_sends_no_request_does_not_import_httpx(tmp_path: Path) -> None:
    _child("start", tmp_path, http=False)
    seen = _child("resume", tmp_path, http=False)
    assert seen["status"] == "finished"
    assert seen["result"] == {"stock": None}
    assert seen["http_modules"] == []


def test_a_resumed_loop_that_imports_httpx_late_records_its_requests(tmp_path: Path) -> None:
    _child("start", tmp_path, http=True)
    seen = _child("resume", tmp_path, http=True)
    assert seen["httpx_imported_before_the_tool"] is False  # the late import is what is tested
    assert seen["status"] == "finished"
    assert seen["result"] == {"stock": {"sku": "A-7", "left": 3}}
    types = seen["types"]
    call, result = types.index("tool.call"), types.index("tool.result")
    assert types[call:result].count("http.request") == 1
    assert types[call:result].count("http.response") == 1
    assert "httpx" in seen["http_modules"]


# --- rec.inputs of a run that goes on is read from its run.started when the program asks -----


class EchoAgent:
    """Calls ``echo`` (a tool that reads ``rec.inputs``) once, after an approval when ``ask``;
    twice in a fork that set ``/forked``."""

    name = "echo-agent"

    def __init__(self, *, ask: bool) -> None:
        self.ask = ask

    def next_step(self, state: Any) -> Any:
        import agentlog as al
        if self.ask and not state["approvals"]["decided"]:
            return al.RequestApproval({"echo": True}, reason="a person says when")
        if len(state["tools"]) < (2 if state["vars"].get("forked") else 1):
            return al.CallTool("echo", {})
        return al.Finish(state["tools"][-1]["result"])


def _echo(rec: Any) -> Any:
    return {"inputs": rec.inputs}


def test_a_resumed_program_reads_the_recorded_inputs(tmp_path: Path) -> None:
    import agentlog as al
    store = al.Store(tmp_path)
    given = {"ticket": "T-1", "lines": [1, 2]}
    run = al.run_agent(EchoAgent(ask=True), input=given, model=None, tools={"echo": _echo}, store=store,
                       run_id="echo", durability="none")
    assert run.status == "waiting"
    al.approve("echo", len(run) - 2, "ops", store=store)
    done = al.resume("echo", EchoAgent(ask=True), model=None, tools={"echo": _echo}, store=store,
                     durability="none")
    assert done.status == "finished"
    assert done.event(len(done) - 1).payload["result"] == {"inputs": given}


def test_a_loop_fork_reads_the_parents_recorded_inputs(tmp_path: Path) -> None:
    import agentlog as al
    store = al.Store(tmp_path)
    given = {"ticket": "T-2"}
    run = al.run_agent(EchoAgent(ask=False), input=given, model=None, tools={"echo": _echo}, store=store,
                       run_id="echo", durability="none")
    end_of_step = next(e.seq for e in run.iter_events() if e.type == "span.ended")
    fork = al.fork(run, end_of_step, program=al.AgentProgram(EchoAgent(ask=False), model=None,
                                                             tools={"echo": _echo}),
                   edit=al.edit.patch_state([{"op": "add", "path": "/forked", "value": True}]))
    assert fork.status == "finished"
    assert [e.type for e in fork.iter_events()].count("tool.result") == 2
    assert fork.event(len(fork) - 1).payload["result"] == {"inputs": given}
