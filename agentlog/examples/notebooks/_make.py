"""Write the tour notebooks (``python agentlog/examples/notebooks/_make.py``) from the cells below.

The notebooks are generated so that they stay reviewable as plain Python; they are written
without outputs (never commit executed notebooks: a FigureWidget's saved state is ~5 MB).
Each opens ``$AGENTLOG_STORE`` if set, else a fresh temporary copy of the bundled sample runs,
so forks and approvals never write into the package.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

SETUP = '''\
import os, pathlib, tempfile
import agentlog as al

# $AGENTLOG_STORE if set; else a temporary copy of the bundled sample runs (forks write to it)
path = os.environ.get("AGENTLOG_STORE")
if path and pathlib.Path(path).exists():
    store = al.Store(path)
else:
    store = al.examples.sample_store(copy_to=pathlib.Path(tempfile.mkdtemp()) / "agentlog-runs")
store'''


def md(text: str) -> nbformat.NotebookNode:
    return new_markdown_cell(text.strip())


def code(text: str) -> nbformat.NotebookNode:
    return new_code_cell(text.strip())


POSTMORTEM = [
    md("""
# 1 · Post-mortem: why did the SRE agent ask for approval?

`sre-0001` is an incident-triage agent: an alert fired on the `orders` service, the agent looked
at alerts, metrics, deploys and runbooks, and then asked a person before restarting `orders`.
This notebook reads the run back from its log: the summary, the span waterfall, the model and
tool calls, the approval request and the chain of events behind it, and the integrity check.
"""),
    code(SETUP),
    md("A bare run in a cell shows its summary card: status, events, tokens, cost per model."),
    code('run = store.run("sre-0001")\nrun'),
    md("""
## The waterfall

Every span on a time axis: agent steps, model calls (with tokens), tool calls. Click a bar to
list the events of its span.
"""),
    code("al.widgets.Waterfall(run)"),
    md("## Model calls and tool calls\n\nBoth are pandas tables; no JSON parsing needed."),
    code('run.llm_calls()[["seq", "model", "input_tokens", "output_tokens", "cost_usd", '
         '"finish_reason", "response_preview"]]'),
    code('run.tool_calls()[["seq", "name", "args_preview", "result_preview", "duration_ms"]]'),
    md("""
## The approval request

Find the `approval.requested` event: the action the agent wanted to take, and `reason`, the
policy that required a person's approval for it (not the model's reasoning; that is next).
"""),
    code('''\
events = run.events
request = run.event(int(events.loc[events.type == "approval.requested", "seq"].iloc[0]))
request.seq, request.payload["action"], request.payload["reason"]'''),
    md("""
## Its cause chain

Why the agent wanted the restart is in the model response that proposed it. The request's
`caused_by` points at that `llm.response` when the runtime recorded it; when it is `None`
(older logs), the cell below looks back for the last `llm.response` whose tool call names the
action's tool, and says which way it found it. The response's `caused_by` is the
`llm.request` it answered. That request has no cause of its own (`caused_by=None`), so the
chain ends there.
"""),
    code('''\
def model_output_behind(run, request):
    """The llm.response that proposed the request's action, and how it was found."""
    if request.caused_by is not None:
        return run.event(request.caused_by), "caused_by"
    tool = request.payload["action"]["tool"]
    for seq in range(request.seq - 1, -1, -1):  # no caused_by: look back for the proposal
        event = run.event(seq)
        if event.type != "llm.response":
            continue
        calls = event.payload["message"].get("tool_calls") or []
        if any(call["function"]["name"] == tool for call in calls):
            return event, "looking back for the llm.response that calls " + tool
    raise LookupError("no llm.response proposed this action")

answer, how = model_output_behind(run, request)
llm_request = run.event(answer.caused_by)
print("model response found by", how)
for event in [request, answer, llm_request]:
    print(f"seq {event.seq:>3}  {event.type:<20} caused_by={event.caused_by}")
print()
print(answer.payload["message"]["content"])'''),
    md("""
The `llm.request`'s messages are the conversation so far, so the tool results recorded before
it are what the model had read when it decided (the orders-db CPU at 93%, the deploy, the
runbook):
"""),
    code('''\
seen = [e for e in run.iter_events(stop=llm_request.seq) if e.type == "tool.result"]
[(e.seq, e.payload["name"], e.payload["result"]) for e in seen][-3:]'''),
    md("And who decided, after how long:"),
    code('''\
decision = next(e for e in run.iter_events(start=request.seq) if e.type.startswith("approval.") and e.caused_by == request.seq)
decision.type, decision.payload, decision.time - request.time'''),
    md("""
## Verify

The log is hash-chained: `verify()` re-hashes every event, checks the blobs and the head.
"""),
    code("run.verify()"),
]

STEP_THROUGH = [
    md("""
# 2 · Step through the state

`diligence-0001` is a research agent that builds a graph: companies, questions, documents,
claims with evidence, a contradiction, risks and memos. The state is never stored: it is a
fold over the log, so the state after any event N is one call away.
"""),
    code(SETUP),
    code('run = store.run("diligence-0001")\nrun'),
    md("## The state at event N"),
    code('''\
state = run.state_at(200)
sorted(state.keys()), len(state["objects"]), len(state["relations"])'''),
    md("What one event changed is a JSON patch between two consecutive states:"),
    code("al.diff_states(run.state_at(193), run.state_at(194))"),
    md("""
## The scrubber

The slider moves through the run: the event, the state after it (what changed is
highlighted), the patch, and the tokens and cost so far.
"""),
    code("scrubber = al.widgets.Scrubber(run, start=194)\nscrubber"),
    code('scrubber.goto(317)\nscrubber.event.type, scrubber.highlighted[:3]'),
    md("""
## The graph

The objects and relations of the final state, grouped by kind (`al.show` opens a run in
tabs; here on the *Graph* tab).
"""),
    code('al.show(run, tab="Graph")'),
    md("""
## Provenance: from a claim back to its source document

Every object carries `provenance = {actor, event, caused_by}`. Start at the event that created
the claim and follow `caused_by`: the model answer that extracted the claim, then the
`llm.request` that answer was for. That request has no recorded cause (`caused_by=None`), so
the walk stops there.
"""),
    code('''\
final = run.state_at(len(run) - 1)
claim = final["objects"]["claim:10"]
print(claim["data"]["text"])
chain, seq = [], claim["provenance"]["event"]
while seq is not None:
    event = run.event(seq)
    chain.append(event)
    seq = event.caused_by
[(e.seq, e.type, e.actor) for e in chain]'''),
    md("""
The document is not on that chain: the claim names its document object, and the cell below
matches the document's URL against the `read_document` tool results recorded before the
request (the latest one is the read the model had in its messages).
"""),
    code('''\
def as_text(value):
    # a long string is stored once as a blob and comes back as a BlobRef: .text() reads and checks it
    return value.text() if isinstance(value, al.BlobRef) else value

document = final["objects"][claim["data"]["document"]]
url = document["data"]["url"]
request = chain[-1]
read = next(e for e in reversed(list(run.iter_events(stop=request.seq)))
            if e.type == "tool.result" and e.payload["name"] == "read_document"
            and e.payload["result"]["url"] == url)
text = as_text(read.payload["result"]["text"])
print(f"document {document['id']} (created at seq {document['provenance']['event']}), read at seq {read.seq}")
print(text[:400])'''),
    code('''\
# the claim's quote is in the document the tool read
quote = claim["data"]["text"]
quote in text'''),
]

FORK = [
    md("""
# 3 · Fork and compare

`refunds-0001` is a refunds agent. A €840 refund for ORD-91277 needed a person's approval,
and `j.keller` denied it. What would have happened if it had been approved? Fork the run at
the denial with the decision changed, let the agent go on, and compare the two runs.

A fork pays only for requests that are new. Its events up to the cut are the parent's
(referenced, not run again). After the cut, a model or tool call whose request is identical to
one the parent recorded (the same cache key) is answered from the parent's log at zero cost;
its tokens still count as recorded usage. Only new requests go out live and are paid for.
"""),
    code(SETUP),
    code('''\
run = store.run("refunds-0001")
program = al.examples.program("refunds")   # the agent with its (scripted) model and tools
denial = run.event(int(run.events.loc[run.events.type == "approval.denied", "seq"].iloc[0]))
denial.seq, denial.payload'''),
    md("""
## The fork panel

The scrubber and the fork panel are linked: move the slider and the panel selects that event.
The panel is on the denial, with the edit *decide the approval otherwise*; its JSON editor is
set to approve. Press **Fork**: the new run and its diff with the parent appear below (and
the new run is written into `store`, like the fork in the next section).
"""),
    code('''\
scrubber = al.widgets.Scrubber(run, start=denial.seq - 1)
panel = al.widgets.ForkPanel(run, program)
panel.link_to(scrubber)
panel.select(denial.seq)
panel.set_edit("approval", {"decision": "approve", "by": "j.keller",
                            "note": "customer sent the returned-goods scan; approve"})
display(scrubber, panel)'''),
    md("""
## The same fork in code

Fork just before the decision (the fork waits for the approval request, as the run did),
approve, and resume. The prefix is the parent's: the same hashes.

Each time this cell runs it writes a new fork into `store`, with a generated id (a timestamp and
a random suffix), next to the bundled fork `refunds-0001-approve`. Notebook 04, run on the
same store, includes it in its tables.
"""),
    code('''\
fork = al.fork(run, at=denial.seq - 1, program=program)
al.approve(fork, denial.payload["request"], "j.keller", "customer sent the returned-goods scan; approve")
fork = al.resume(fork, program.agent, model=program.model, tools=program.tools)
fork.status, len(fork), fork.parent.id, fork.fork_seq'''),
    code('''\
same = (run.events.hash.iloc[: denial.seq].tolist() == fork.events.hash.iloc[: denial.seq].tolist())
same'''),
    md("""
## What the fork paid for

The fork's own model calls, after the cut. The first answers the approval, a request the
parent never made: it went out live and was paid for. The next ticket (T-5103, the broken
kettle) goes as in the parent, with identical requests, so those calls were served from the
parent's log:
`source=log`, `cost_source=cache`, `cost_usd=0`, and `served_from_seq` is the parent's event.
"""),
    code('''\
import pandas as pd

calls = fork.llm_calls()
own = calls[calls.seq > fork.fork_seq]  # the fork's own part, after the cut
own[["seq", "source", "cost_source", "cost_usd", "served_from_seq"]]'''),
    md("Served calls keep their recorded tokens but cost nothing. (Tool calls are served the same "
       "way: see `fork.tool_calls()`.)"),
    code('own.groupby("source")[["input_tokens", "output_tokens", "cost_usd"]].sum()'),
    md("## Compare\n\n`DiffView` aligns the two runs after the shared prefix and marks the first divergence."),
    code("view = al.widgets.DiffView(run, fork)\nview"),
    code("view.divergence_seq"),
    md("""
## What the change cost

`d.usage` compares the two runs as read, the shared prefix included: `a` is the parent, `b`
the fork. `b` counts the prefix at the parent's recorded cost plus the fork's own calls: the
live one at its price, the served ones with their tokens but at $0. So the fork used about as
many tokens as the parent but cost less. (The parent's `duration_ms` includes the 30 minutes
it waited for j.keller's decision; the fork was approved at once.)
"""),
    code('''\
d = al.diff(run, fork)
with pd.option_context("display.float_format", "{:,.10g}".format):  # no scientific notation
    display(d.usage.round(6))'''),
]

COST = [
    md("""
# 4 · Cost and tokens

Tokens and dollars per model, per step, per run, and across the whole store. The usage columns
are typed Parquet columns, so these tables never parse JSON, and the whole store is one
Hive-partitioned dataset that DuckDB reads as it is.
"""),
    code(SETUP),
    md("## One run"),
    code('run = store.run("diligence-0001")\nrun.cost(by="model")'),
    code("al.widgets.CostDashboard(run)"),
    md("""
## The whole store

The bundled sample runs, plus any fork you made in notebook 03 if it ran on this same store
(`$AGENTLOG_STORE`): those have generated ids.
"""),
    code("store.runs()"),
    code('store.cost(by=["run", "model"])'),
    code("al.widgets.CostDashboard(store)"),
    md("The figures are plain plotly figures (a dict by name), for reports and static exports:"),
    code('''\
figures = al.widgets.cost_figures(store)
print(sorted(figures))
figures["by_run"].show()'''),
    md("""
## SQL with DuckDB

`store.sql` runs DuckDB over views of the dataset: `events` (stored events with `run_id`),
`run_events` (every run as read, fork prefixes stitched in), `runs`, `spans`, and more.
"""),
    code('''\
store.sql("""
    select run_id, model, count(*) as calls,
           sum(input_tokens) as input_tokens, sum(output_tokens) as output_tokens,
           round(sum(cost_usd), 6) as cost_usd
    from events
    where type = 'llm.response'
    group by run_id, model
    order by cost_usd desc
""")'''),
    code('''\
# tool calls per run and tool
store.sql("""
    select run_id, json_extract_string(payload, '$.name') as tool, count(*) as calls
    from events where type = 'tool.result'
    group by all order by run_id, calls desc
""")'''),
    md("""
A fork stores only its own events, after the cut, and pays only for requests that are new:
a model call whose request is identical to one its parent recorded (the same cache key) is
answered from the parent's log at zero cost, with `served_from_seq` in its payload. Its
tokens still count as recorded usage. Compare the bundled fork with its parent:
"""),
    code('''\
store.sql("""
    select run_id, count(*) as own_events,
           count(*) filter (where type = 'llm.response') as llm_calls,
           count(*) filter (where type = 'llm.response'
                            and json_extract(payload, '$.served_from_seq') is not null)
               as served_from_log,
           sum(input_tokens) as input_tokens, round(sum(cost_usd), 6) as own_cost_usd
    from events where run_id in ('refunds-0001', 'refunds-0001-approve')
    group by run_id order by run_id
""")'''),
]

NOTEBOOKS = {
    "01_postmortem.ipynb": POSTMORTEM,
    "02_step_through_state.ipynb": STEP_THROUGH,
    "03_fork_and_compare.ipynb": FORK,
    "04_cost_and_tokens.ipynb": COST,
}


def write(folder: Path = HERE) -> list[Path]:
    """Write every notebook into ``folder``; return their paths."""
    paths = []
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=cells)
        for i, cell in enumerate(nb.cells):
            cell.id = f"{name[:2]}-{i:02d}"  # stable ids: regenerating gives the same file
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        path = folder / name
        nbformat.validate(nb)
        nbformat.write(nb, path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in write():
        print("wrote", p.relative_to(HERE.parent))
