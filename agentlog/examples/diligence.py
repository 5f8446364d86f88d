"""Research with provenance: companies → questions → documents → claims with evidence →
a contradiction → risks → a memo, as a graph in the log.

This is the ActiveGraph diligence example at a small scale. The agent is a pure
``next_step`` over the folded graph (``state["objects"]``, ``state["relations"]``); every
object it creates is an ``object.created`` / ``object.updated`` / ``relation.created`` event
appended by an :class:`~agentlog.Emit` step, with its provenance: the ``actor`` (the role
that produced it: ``planner``, ``question_generator``, ``document_researcher``,
``contradiction_detector``, ``risk_identifier``, ``memo_synthesizer``) and ``caused_by`` (the
seq of the model answer, tool result or claim it was derived from). So for any claim in the
memo you can walk back: the claim → the ``llm.response`` that extracted it → the
``tool.result`` that read the document → the search that found it → the question it
addresses → the company::

    run = al.examples.run_example("diligence", store=store)
    state = run.state_at(len(run) - 1)
    contradiction = next(o for o in state["objects"].values() if o["kind"] == "contradiction")
    claim = state["objects"][contradiction["data"]["claims"][0]]
    run.event(claim["provenance"]["caused_by"])            # the model answer it came from

Stellar Logistics' annual report says revenue grew 18%; an independent carrier survey says
revenue per route fell 9%. Both claims are confident, on the same topic, in opposite
directions: the ``contradiction_detector`` (plain code, no model) records a contradiction,
the ``risk_identifier`` turns it into a high-severity risk, and the memo lists it as open.

The "model" reports ``gpt-4o`` and is scripted: it extracts the sentences of a document that
carry numbers and match the question, and tags each with a topic and a direction, so a
fork that edits a document's text gets different claims. Documents are fixtures in
``agentlog/examples/data/diligence/``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..capture.runtime import CallModel, CallTool, Emit, Fact, Finish
from ..events import ObjectCreated, ObjectUpdated, RelationCreated
from ..folding import thaw
from ._data import read_json, texts
from ._scripted import SampleClock, ScriptedModel

__all__ = ["INPUT", "MODEL", "DiligenceAgent", "model", "tools"]

MODEL = "gpt-4o"
INPUT = {"thesis": "Which of these two would we back at the next round, and what could go wrong?",
         "companies": ["northwind", "stellar"]}

# Topics and directions the scripted model tags claims with (first match wins).
_TOPICS = (("customer", "customers"), ("shipper", "customers"), ("revenue", "revenue"),
           ("margin", "margin"), ("loss", "profitability"), ("cash", "cash"), ("driver", "drivers"),
           ("cobot", "product"), ("certification", "product"), ("price", "pricing"),
           ("metro", "network"), ("hire", "hiring"), ("automation", "capex"))
_UP = ("grew", "up", "rose", "expanded", "more", "added", "growth", "increase")
_DOWN = ("declined", "down", "fell", "cut", "lower", "decrease")


def _obj(state: Any, kind: str, **data: Any) -> list[Any]:
    return sorted((o for o in state["objects"].values() if o["kind"] == kind
                   and all(o["data"].get(k) == v for k, v in data.items())), key=lambda o: o["id"])


def _created(id: str, kind: str, data: Mapping[str, Any], actor: str, caused_by: int | None) -> Fact:
    return Fact(ObjectCreated(id=id, kind=kind, data=dict(data)), actor=actor, caused_by=caused_by)


def _updated(id: str, data: Mapping[str, Any], actor: str, caused_by: int | None) -> Fact:
    return Fact(ObjectUpdated(id=id, data=dict(data)), actor=actor, caused_by=caused_by)


def _related(kind: str, source: str, target: str, actor: str, caused_by: int | None) -> Fact:
    return Fact(RelationCreated(id=f"{kind}:{source}->{target}", kind=kind, source=source, target=target),
                actor=actor, caused_by=caused_by)


def _answer(state: Any, task: str, **about: Any) -> tuple[int, dict[str, Any]] | None:
    """The model's last answer, if it is the one for this task."""
    answer = state["loop"]["answer"]
    if answer is None:
        return None
    try:
        data = json.loads(str(answer["content"]))
    except ValueError:
        return None
    if data.get("task") != task or any(data.get(k) != v for k, v in about.items()):
        return None
    return answer["seq"], data


def _last_tool(state: Any, name: str, **args: Any) -> Any:
    tools = state["tools"]
    if tools and tools[-1]["name"] == name and all(tools[-1]["args"].get(k) == v for k, v in args.items()):
        return tools[-1]
    return None


def _ask(task: str, payload: Mapping[str, Any]) -> CallModel:
    return CallModel({"model": MODEL, "temperature": 0, "response_format": {"type": "json_object"},
                      "messages": [{"role": "system", "content": "You are a diligence analyst. Answer in JSON."},
                                   {"role": "user", "content": json.dumps({"task": task, **payload}, sort_keys=True)}]})


class DiligenceAgent:
    """The diligence pipeline as one pure decision over the graph."""

    name = "diligence-agent"

    def next_step(self, state: Any) -> Any:
        if not _obj(state, "company"):
            return self._plan(state)
        for company in _obj(state, "company"):
            step = self._company(state, company)
            if step is not None:
                return step
        memos = _obj(state, "memo")
        return Finish({"memos": [m["id"] for m in memos],
                       "contradictions": len(_obj(state, "contradiction")),
                       "risks": len(_obj(state, "risk"))})

    def _plan(self, state: Any) -> Emit:
        known = {c["id"]: c for c in read_json("diligence/companies.json")}
        return Emit([_created(f"company:{cid}", "company", {k: v for k, v in known[cid].items() if k != "id"},
                              "planner", 0) for cid in state["input"]["companies"]])

    def _company(self, state: Any, company: Any) -> Any:
        cid = company["id"]
        questions = _obj(state, "question", company=cid)
        if not questions:
            return self._questions(state, company)
        for question in questions:
            if question["data"]["status"] != "answered":
                return self._research(state, company, question)
        step = self._contradictions(state, cid)
        if step is not None:
            return step
        if not _obj(state, "risk", company=cid):
            return self._risks(state, cid)
        if not _obj(state, "memo", company=cid):
            return self._memo(state, cid)
        return None

    def _questions(self, state: Any, company: Any) -> Any:
        cid = company["id"]
        found = _answer(state, "questions", company=cid)
        if found is None:
            return _ask("questions", {"company": cid, "name": company["data"]["name"],
                                      "description": company["data"]["description"],
                                      "thesis": state["input"]["thesis"]})
        seq, data = found
        facts: list[Fact] = []
        for i, q in enumerate(data["questions"], 1):
            qid = f"question:{cid.split(':')[1]}:{i}"
            facts.append(_created(qid, "question", {"text": q["text"], "terms": q["terms"], "company": cid,
                                                    "status": "open"}, "question_generator", seq))
            facts.append(_related("about", qid, cid, "question_generator", seq))
        return Emit(facts)

    def _research(self, state: Any, company: Any, question: Any) -> Any:
        qid, data = question["id"], question["data"]
        if data["status"] == "open":
            found = _last_tool(state, "search_documents", question=qid)
            if found is None:
                return CallTool("search_documents", {"company": company["data"]["name"], "question": qid,
                                                     "terms": thaw(data["terms"])})
            return self._found(state, company, question, found)
        done = list(data.get("read", []))
        url = next(u for u in data["documents"] if u not in done)
        extracted = _answer(state, "claims", question=qid, document=url)
        if extracted is not None:
            return self._claims(state, company, question, url, *extracted)
        read = _last_tool(state, "read_document", url=url)
        if read is None:
            return CallTool("read_document", {"url": url})
        return _ask("claims", {"question": qid, "text": data["text"], "terms": thaw(data["terms"]),
                               "document": url, "title": read["result"]["title"],
                               "content": read["result"]["text"]})

    def _found(self, state: Any, company: Any, question: Any, found: Any) -> Emit:
        seq, cid = found["seq"], company["id"]
        facts: list[Fact] = []
        for doc in found["result"]:
            did = f"document:{doc['slug']}"
            if did not in state["objects"] and all(getattr(f.body, "id", None) != did for f in facts):
                facts.append(_created(did, "document", {"title": doc["title"], "url": doc["url"], "company": cid},
                                      "document_researcher", seq))
                facts.append(_related("about", did, cid, "document_researcher", seq))
        urls = [doc["url"] for doc in found["result"]]
        facts.append(_updated(question["id"], {"status": "searched" if urls else "answered", "documents": urls,
                                               "read": []}, "document_researcher", seq))
        return Emit(facts)

    def _claims(self, state: Any, company: Any, question: Any, url: str, seq: int, data: Mapping[str, Any]) -> Emit:
        qid = question["id"]
        did = next(o["id"] for o in _obj(state, "document") if o["data"]["url"] == url)
        facts: list[Fact] = []
        made = len(_obj(state, "claim"))
        for item in data["claims"]:
            same = [c for c in _obj(state, "claim", document=did) if c["data"]["text"] == item["text"]]
            if same:  # already extracted for another question: it addresses this one too
                facts.append(_related("addresses", same[0]["id"], qid, "document_researcher", seq))
                continue
            made += 1
            claim, evidence = f"claim:{made}", f"evidence:{made}"
            facts += [
                _created(claim, "claim", {"text": item["text"], "topic": item["topic"],
                                          "direction": item["direction"], "confidence": item["confidence"],
                                          "company": company["id"], "document": did}, "document_researcher", seq),
                _created(evidence, "evidence", {"quote": item["quote"], "document": did, "claim": claim},
                         "document_researcher", seq),
                _related("addresses", claim, qid, "document_researcher", seq),
                _related("derived_from", claim, did, "document_researcher", seq),
                _related("supports", evidence, claim, "document_researcher", seq),
                _related("derived_from", evidence, did, "document_researcher", seq)]
        read = [*question["data"].get("read", []), url]
        status = "answered" if len(read) == len(question["data"]["documents"]) else "searched"
        facts.append(_updated(qid, {"read": read, "status": status}, "document_researcher", seq))
        return Emit(facts)

    def _contradictions(self, state: Any, cid: str) -> Emit | None:
        """Plain code, no model: confident claims on one topic that point opposite ways."""
        claims = [c for c in _obj(state, "claim", company=cid) if c["data"]["confidence"] >= 0.7]
        known = {tuple(thaw(o["data"]["claims"])) for o in _obj(state, "contradiction")}
        for a in claims:
            for b in claims:
                pair = (a["id"], b["id"])
                if (a["id"] < b["id"] and a["data"]["topic"] == b["data"]["topic"]
                        and {a["data"]["direction"], b["data"]["direction"]} == {"up", "down"}
                        and pair not in known):
                    later = max(a["provenance"]["event"], b["provenance"]["event"])
                    xid = f"contradiction:{len(_obj(state, 'contradiction')) + 1}"
                    actor = "contradiction_detector"
                    return Emit([
                        _created(xid, "contradiction", {
                            "claims": list(pair), "topic": a["data"]["topic"], "company": cid, "status": "open",
                            "rationale": f"{a['data']['text']!r} and {b['data']['text']!r} point in opposite "
                                         f"directions on {a['data']['topic']}, both at confidence >= 0.7"},
                                 actor, later),
                        _related("contradicts", a["id"], b["id"], actor, later),
                        _related("concerns", xid, a["id"], actor, later),
                        _related("concerns", xid, b["id"], actor, later)])
        return None

    def _claims_for(self, state: Any, cid: str) -> list[dict[str, Any]]:
        return [{"id": c["id"], **{k: thaw(c["data"][k]) for k in ("text", "topic", "direction")}}
                for c in _obj(state, "claim", company=cid)]

    def _risks(self, state: Any, cid: str) -> Any:
        found = _answer(state, "risks", company=cid)
        if found is None:
            return _ask("risks", {"company": cid, "claims": self._claims_for(state, cid),
                                  "contradictions": [{"id": o["id"], "claims": thaw(o["data"]["claims"])}
                                                     for o in _obj(state, "contradiction", company=cid)]})
        seq, data = found
        facts: list[Fact] = []
        for i, risk in enumerate(data["risks"], 1):
            rid = f"risk:{cid.split(':')[1]}:{i}"
            facts.append(_created(rid, "risk", {"title": risk["title"], "severity": risk["severity"],
                                                "description": risk["description"], "company": cid},
                                  "risk_identifier", seq))
            facts += [_related("raises", claim, rid, "risk_identifier", seq) for claim in risk["claims"]]
        return Emit(facts)

    def _memo(self, state: Any, cid: str) -> Any:
        found = _answer(state, "memo", company=cid)
        if found is None:
            return _ask("memo", {"company": cid, "name": state["objects"][cid]["data"]["name"],
                                 "claims": self._claims_for(state, cid),
                                 "risks": [{"id": r["id"], "title": r["data"]["title"],
                                            "severity": r["data"]["severity"]} for r in _obj(state, "risk", company=cid)],
                                 "contradictions": [o["id"] for o in _obj(state, "contradiction", company=cid)]})
        seq, data = found
        mid = f"memo:{cid.split(':')[1]}"
        facts = [_created(mid, "memo", {"company": cid, "summary": data["summary"],
                                        "recommendation": data["recommendation"]}, "memo_synthesizer", seq),
                 _related("covers", mid, cid, "memo_synthesizer", seq)]
        facts += [_related("cites", mid, ref, "memo_synthesizer", seq)
                  for ref in [*data["key_claims"], *data["risks"], *data["open_contradictions"]]]
        return Emit(facts)


# --- the scripted model --------------------------------------------------------------------


def _sentences(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _tag(sentence: str) -> tuple[str, str]:
    low = sentence.lower()
    topic = next((t for key, t in _TOPICS if key in low), "other")
    words = re.findall(r"[a-z]+", low)
    direction = next(("up" if w in _UP else "down" for w in words if w in _UP or w in _DOWN), "none")
    return topic, direction


_QUESTIONS = (
    ("How fast is {name}'s revenue growing, and is the growth real?", ["revenue", "growth", "grew", "declined"]),
    ("How concentrated are {name}'s customers, and how sticky are they?", ["customers", "customer", "retention"]),
    ("What could derail {name} in the next twelve months?", ["launch", "competitors", "churn", "cash", "cut"]),
)


def _reply(task: str, data: Mapping[str, Any]) -> str:
    """The JSON answer of the scripted analyst to one task."""
    if task == "questions":
        return json.dumps({"task": task, "company": data["company"], "questions": [
            {"text": text.format(name=data["name"]), "terms": terms} for text, terms in _QUESTIONS]})
    if task == "claims":
        terms = [t.lower() for t in data["terms"]]
        filing = "filing" in str(data["title"]).lower()
        picked = [s for s in _sentences(data["content"]) if re.search(r"\d", s)
                  and any(t in s.lower() for t in terms)][:2]
        claims = []
        for s in picked:
            topic, direction = _tag(s)
            claims.append({"text": s.rstrip("."), "quote": s, "topic": topic, "direction": direction,
                           "confidence": 0.9 if filing else 0.75})
        return json.dumps({"task": task, "question": data["question"], "document": data["document"],
                           "claims": claims})
    if task == "risks":
        risks = [{"title": "Revenue trajectory is disputed", "severity": "high",
                  "description": "Filed revenue growth and independent evidence disagree; verify before "
                                 "valuing on growth.", "claims": x["claims"]} for x in data["contradictions"]]
        for c in data["claims"]:
            if c["topic"] == "customers" and "revenue" in c["text"] and re.search(r"\b([5-9]\d)%", c["text"]):
                risks.append({"title": "Customer concentration", "severity": "high",
                              "description": c["text"], "claims": [c["id"]]})
            elif c["topic"] in ("product", "drivers", "pricing") and len(risks) < 3:
                risks.append({"title": f"{c['topic'].capitalize()} risk", "severity": "medium",
                              "description": c["text"], "claims": [c["id"]]})
        return json.dumps({"task": task, "company": data["company"], "risks": risks[:3]})
    if task == "memo":
        high = [r for r in data["risks"] if r["severity"] == "high"]
        open_ = data["contradictions"]
        recommendation = "hold: resolve the open contradiction first" if open_ else (
            "proceed with conditions" if high else "proceed")
        summary = (f"{data['name']}: {len(data['claims'])} claims from the documents, {len(data['risks'])} risks "
                   f"({len(high)} high), {len(open_)} open contradiction(s). Recommendation: {recommendation}.")
        return json.dumps({"task": task, "company": data["company"], "summary": summary,
                           "recommendation": recommendation,
                           "key_claims": [c["id"] for c in data["claims"] if c["direction"] != "none"][:4],
                           "risks": [r["id"] for r in data["risks"]], "open_contradictions": open_})
    return json.dumps({"task": task, "error": "unknown task"})


def rules(messages: list[dict[str, Any]]) -> str:
    """Read the task in the last user message and answer it."""
    data = json.loads(str(messages[-1]["content"]))
    return _reply(str(data.pop("task")), data)


def model(clock: SampleClock | None = None) -> ScriptedModel:
    """The scripted stand-in for ``gpt-4o``."""
    return ScriptedModel(MODEL, rules, clock=clock, latency=1.4)


# --- the tools (fixtures) ------------------------------------------------------------------

BASE_URL = "https://docs.example-dataroom.com/"


def _documents() -> list[dict[str, Any]]:
    found = []
    for name, text in texts("diligence/documents"):
        slug = name.removesuffix(".md")
        found.append({"slug": slug, "url": BASE_URL + slug, "title": text.splitlines()[0].lstrip("# ").strip(),
                      "text": text})
    return found


def tools(clock: SampleClock | None = None) -> dict[str, Any]:
    """A document store over the fixtures: keyword search, and reading a document."""

    def wait(seconds: float) -> None:
        if clock is not None:
            clock.advance(seconds)

    def search_documents(company: str, question: str, terms: Sequence[str]) -> list[dict[str, Any]]:
        wait(0.35)
        prefix = company.split()[0].lower()
        scored = []
        for doc in _documents():
            if doc["slug"].startswith(prefix):
                score = sum(t.lower() in doc["text"].lower() for t in terms)
                if score:
                    scored.append((-score, doc["slug"], doc))
        return [{"slug": d["slug"], "url": d["url"], "title": d["title"], "score": -s}
                for s, _, d in sorted(scored)[:2]]

    def read_document(url: str) -> dict[str, Any]:
        wait(0.2)
        for doc in _documents():
            if doc["url"] == url:
                return {"url": url, "title": doc["title"], "text": doc["text"]}
        raise FileNotFoundError(f"no document at {url}")

    return {"search_documents": search_documents, "read_document": read_document}
