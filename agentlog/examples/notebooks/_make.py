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

Find the `approval.requested` event: what the agent wanted to do, and why.
"""),
    code('''\
events = run.events
request = run.event(int(events.loc[events.type == "approval.requested", "seq"].iloc[0]))
request.seq, request.payload["action"], request.payload["reason"]'''),
    md("""
## Its cause chain

The request records the model's reasoning; the model output that triggered it is the last
`llm.response` before it whose tool call names the same tool. From there, `caused_by` leads
to the request the model answered, and that request's messages hold the tool results the
model had read (the orders-db CPU at 93%, the runbook).
"""),
    code('''\
def model_output_behind(run, request):
    """The last llm.response before `request` that asked for the same tool."""
    tool = request.payload["action"]["tool"]
    for seq in range(request.seq - 1, -1, -1):
        event = run.event(seq)
        calls = event.payload.get("message", {}).get("tool_calls") or [] if event.type == "llm.response" else []
        if any(call["function"]["name"] == tool for call in calls):
            return event

answer = model_output_behind(run, request)
llm_request = run.event(answer.caused_by)
chain = [request, answer, llm_request]
for event in chain:
    print(f"seq {event.seq:>3}  {event.type:<20} caused_by={event.caused_by}")
print()
print(answer.payload["message"]["content"])'''),
    code('''\
# the tool results the model had seen when it decided
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

Every object carries `provenance = {actor, event, caused_by}`. Walk it back: the claim → the
model answer that extracted it → the request that answer was for, whose messages hold the
document → the `read_document` tool result that fetched it.
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
    code('''\
document = final["objects"][claim["data"]["document"]]
url = document["data"]["url"]
request = chain[-1]
read = next(e for e in reversed(list(run.iter_events(stop=request.seq)))
            if e.type == "tool.result" and e.payload["name"] == "read_document"
            and e.payload["result"]["url"] == url)
result = read.payload["result"]
# large results are stored once as a blob (a BlobRef): .text() reads and checks it
text = result.text() if hasattr(result, "text") and callable(result.text) else result["text"]
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
the denial with the decision changed, let the agent go on, and compare the two runs. Every
model and tool call before the cut is served from the log: it is not paid for again.
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
set to approve. Press **Fork**: the new run and its diff with the parent appear below.
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
"""),
    code('''\
fork = al.fork(run, at=denial.seq - 1, program=program)
al.approve(fork, denial.payload["request"], "j.keller", "customer sent the returned-goods scan; approve")
fork = al.resume(fork, program.agent, model=program.model, tools=program.tools)
fork.status, len(fork), fork.parent.id, fork.fork_seq'''),
    code('''\
same = (run.events.hash.iloc[: denial.seq].tolist() == fork.events.hash.iloc[: denial.seq].tolist())
same'''),
    md("## Compare\n\n`DiffView` aligns the two runs after the shared prefix and marks the first divergence."),
    code("view = al.widgets.DiffView(run, fork)\nview"),
    code("view.divergence_seq"),
    md("## What the change cost"),
    code('''\
d = al.diff(run, fork)
d.usage'''),
    code('''\
import pandas as pd
pd.DataFrame({"refunds-0001": run.cost(by="model").sum(numeric_only=True),
              "fork": fork.cost(by="model").sum(numeric_only=True)})'''),
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
    md("## The whole store"),
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
    md("A fork pays only for what it ran after the cut: compare a fork with its parent."),
    code('''\
store.sql("""
    select run_id, count(*) as own_events, round(sum(cost_usd), 6) as own_cost_usd
    from events where run_id in ('refunds-0001', 'refunds-0001-approve')
    group by run_id
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
