"""A job hunt: scan the same career pages again and again, score what is new, apply.

Three times, the agent fetches three career pages through the recorded HTTP transport
(``al.transport.client(rec, transport=httpx.MockTransport(...))``; the pages are large, as career
pages are, with their inline styles and scripts). Each page body, being over the store's blob
threshold, becomes a blob (the small JSON answers of the POSTs stay in their events), and a
page fetched again with the same content adds nothing to the store: nine fetches, four blobs
(one board posts a new opening before the third scan). New postings go to the model for scoring
against the profile; the good ones get an application through the board's form, a POST with
an ``Idempotency-Key`` header: the tool's idempotency key (``run_id:seq``), so a crash and a
resume can never apply twice::

    run = al.examples.run_example("jobhunt", store=store)
    from agentlog.events import HTTPResponse
    bodies = [HTTPResponse.of(e).body for e in run.iter_events() if e.type == HTTPResponse.TYPE]
    pages = [b for b in bodies if isinstance(b, al.BlobRef)]
    len(pages), len({b.digest for b in pages})      # fetches vs blobs: (9, 4)

Both tools take ``rec``: they do their own I/O through the recorder, so on replay they run
again and every HTTP exchange is served from the log.

The "model" reports ``gpt-4o-mini`` and is scripted (skills, location and salary against the
profile); the boards are fixtures (``agentlog/examples/data/jobhunt/boards.json``).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from typing import Any

import httpx

from ..capture.runtime import CallModel, CallTool, Emit, Fact, Finish
from ..capture.transport import client
from ..events import StatePatch
from ..folding import thaw
from ._data import read_json
from ._scripted import SampleClock, ScriptedModel

__all__ = ["INPUT", "MODEL", "THRESHOLD", "JobHuntAgent", "model", "tools"]

MODEL = "gpt-4o-mini"
THRESHOLD = 0.85
_FIXTURE = read_json("jobhunt/boards.json")
INPUT = {"profile": _FIXTURE["profile"], "boards": list(_FIXTURE["boards"]), "scans": 3}


class JobHuntAgent:
    """Scan every board, score what is new, apply to the best; repeat ``scans`` times."""

    name = "jobhunt-agent"

    def next_step(self, state: Any) -> Any:
        boards, scans = list(state["input"]["boards"]), state["input"]["scans"]
        done = state["vars"].get("scans_done", 0)
        if done == scans:
            return self._finish(state)
        fetched = [t for t in state["tools"] if t["name"] == "fetch_board"][done * len(boards):]
        if len(fetched) < len(boards):
            return CallTool("fetch_board", {"url": boards[len(fetched)]})
        postings = [p for t in fetched if t["error"] is None for p in thaw(t["result"])]
        seen = set(state["vars"].get("seen", []))
        new = [p for p in postings if p["id"] not in seen]
        scores: dict[str, float] = {}
        if new:
            answer = state["loop"]["answer"]
            reply = json.loads(str(answer["content"])) if answer is not None else {}
            if reply.get("scan") != done + 1:
                return self._score(state, done + 1, new)
            scores = reply["scores"]
        applied = {t["args"]["posting_id"] for t in state["tools"]
                   if t["name"] == "submit_application" and t["error"] is None}
        for p in new:
            if scores.get(p["id"], 0) >= THRESHOLD and p["id"] not in applied:
                profile = state["input"]["profile"]
                return CallTool("submit_application", {"posting_id": p["id"], "apply_url": p["apply_url"],
                                                       "name": profile["name"], "email": profile["email"]})
        shortlist = sorted([*state["vars"].get("shortlist", []),
                            *(p["id"] for p in new if scores.get(p["id"], 0) >= THRESHOLD)])
        return Emit([Fact(StatePatch(ops=[
            {"op": "add", "path": "/scans_done", "value": done + 1},
            {"op": "add", "path": "/seen", "value": sorted(seen | {p["id"] for p in postings})},
            {"op": "add", "path": "/shortlist", "value": shortlist}]),
            caused_by=fetched[-1]["seq"])])

    def _score(self, state: Any, scan: int, new: list[dict[str, Any]]) -> CallModel:
        brief = [{k: p[k] for k in ("id", "title", "location", "salary_eur", "tags")} for p in new]
        return CallModel({"model": MODEL, "temperature": 0, "response_format": {"type": "json_object"},
                          "messages": [
                              {"role": "system", "content": "Score each posting from 0 to 1 for this "
                                                            "candidate. Answer in JSON."},
                              {"role": "user", "content": json.dumps({"scan": scan, "profile": thaw(
                                  state["input"]["profile"]), "postings": brief}, sort_keys=True)}]})

    def _finish(self, state: Any) -> Finish:
        applications = [thaw(t["result"]) for t in state["tools"]
                        if t["name"] == "submit_application" and t["error"] is None]
        return Finish({"seen": len(state["vars"].get("seen", [])), "applications": applications})


# --- the scripted model --------------------------------------------------------------------


def score(posting: Mapping[str, Any], profile: Mapping[str, Any]) -> float:
    """Skills matched, location and salary, as a recruiter model would weigh them.

    >>> score({"tags": ["python", "sql"], "location": "Remote", "salary_eur": 90000},
    ...       {"skills": ["python"], "locations": ["Remote"], "min_salary_eur": 85000})
    0.7
    """
    tags = list(posting["tags"])
    skills = 0.6 * sum(t in profile["skills"] for t in tags) / max(len(tags), 1)
    place = 0.25 if posting["location"] in profile["locations"] else 0.0
    pay = 0.15 if posting["salary_eur"] >= profile["min_salary_eur"] else 0.0
    return round(skills + place + pay, 2)


def rules(messages: list[dict[str, Any]]) -> str:
    data = json.loads(str(messages[-1]["content"]))
    return json.dumps({"scan": data["scan"], "scores": {p["id"]: score(p, data["profile"])
                                                        for p in data["postings"]}}, sort_keys=True)


def model(clock: SampleClock | None = None) -> ScriptedModel:
    """The scripted stand-in for ``gpt-4o-mini``."""
    return ScriptedModel(MODEL, rules, clock=clock, latency=0.8)


# --- the career sites (an httpx MockTransport) ---------------------------------------------

# What makes a real career page heavy: framework CSS and a tracking/config script.
_STYLE = "".join(f".c{i}{{margin:{i % 7}px {i % 5}px;color:#{(i * 2654435761) % 0xFFFFFF:06x};"
                 f"font:{11 + i % 5}px/1.{i % 9} sans-serif}}\n" for i in range(1400))
_SCRIPT = json.dumps({"experiments": [{"id": f"exp-{i}", "bucket": i % 3, "weight": (i * 37) % 100,
                                       "copy": f"Join us variant {i}"} for i in range(1100)]})


def _render(url: str, company: str, postings: list[dict[str, Any]]) -> str:
    cards = "".join(
        f'<article class="posting" data-id="{p["id"]}" data-location="{html.escape(p["location"])}" '
        f'data-salary="{p["salary_eur"]}" data-tags="{html.escape(",".join(p["tags"]))}">'
        f'<h2>{html.escape(p["title"])}</h2><p>{html.escape(p["summary"])}</p>'
        f'<a class="apply" href="{url}/{p["id"]}/apply">Apply</a></article>\n' for p in postings)
    return (f"<!doctype html><html><head><title>Careers at {html.escape(company)}</title>"
            f"<style>{_STYLE}</style><script>window.__CONFIG__={_SCRIPT}</script></head>"
            f"<body><h1>Open roles at {html.escape(company)}</h1>\n{cards}</body></html>")


_POSTING = re.compile(r'<article class="posting" data-id="([^"]+)" data-location="([^"]*)" '
                      r'data-salary="(\d+)" data-tags="([^"]*)"><h2>([^<]*)</h2><p>([^<]*)</p>'
                      r'<a class="apply" href="([^"]+)">')


def parse(page: str) -> list[dict[str, Any]]:
    """The postings on a career page."""
    return [{"id": m[0], "location": html.unescape(m[1]), "salary_eur": int(m[2]),
             "tags": html.unescape(m[3]).split(","), "title": html.unescape(m[4]),
             "summary": html.unescape(m[5]), "apply_url": m[6]} for m in _POSTING.findall(page)]


class CareerSites:
    """The boards behind an ``httpx.MockTransport``: one posts a new opening after being read
    twice; the apply form keeps one application per ``Idempotency-Key``."""

    def __init__(self, clock: SampleClock | None = None) -> None:
        self.clock = clock
        self.reads: dict[str, int] = {}
        self.applications: dict[str, dict[str, Any]] = {}

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.clock is not None:
            self.clock.advance(0.45)
        url = str(request.url)
        boards = _FIXTURE["boards"]
        if request.method == "GET" and url in boards:
            board = boards[url]
            self.reads[url] = self.reads.get(url, 0) + 1
            postings = board["postings"] + (board["later"] if self.reads[url] > 2 else [])
            return httpx.Response(200, headers={"content-type": "text/html; charset=utf-8"},
                                  text=_render(url, board["company"], postings))
        if request.method == "POST" and url.endswith("/apply"):
            key = request.headers.get("idempotency-key", "")
            if key not in self.applications:  # a repeat with the same key is the same application
                form = json.loads(request.content)
                self.applications[key] = {"application_id": f"app-{form['posting_id']}",
                                          "posting_id": form["posting_id"], "status": "received"}
            return httpx.Response(201, json=self.applications[key])
        return httpx.Response(404, text="not found")


def tools(clock: SampleClock | None = None) -> dict[str, Any]:
    """``fetch_board`` and ``submit_application``, both through the recorded HTTP transport."""
    sites = CareerSites(clock)
    transport = httpx.MockTransport(sites.handle)
    # httpx's default accept-encoding grows "zstd" when zstandard is installed (LangGraph's
    # dependencies pull it in): pinned, the recorded sample runs are the same bytes everywhere
    pinned = {"accept-encoding": "gzip, deflate"}

    def fetch_board(url: str, rec: Any) -> list[dict[str, Any]]:
        with client(rec, transport=transport, headers=pinned) as http:
            response = http.get(url)
            response.raise_for_status()
            return parse(response.text)

    def submit_application(posting_id: str, apply_url: str, name: str, email: str, idempotency_key: str,
                           rec: Any) -> dict[str, Any]:
        with client(rec, transport=transport, headers=pinned) as http:
            response = http.post(apply_url, json={"posting_id": posting_id, "name": name, "email": email},
                                 headers={"Idempotency-Key": idempotency_key})
            response.raise_for_status()
            return dict(response.json())

    return {"fetch_board": fetch_board, "submit_application": submit_application}
