"""Scrubber on the sample runs: states and highlights match the fold at every seq, stepping
matches ``run.states()``, type navigation, the cause link, escaping, errors, the widget."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.errors import EventNotFoundError
from agentlog.folding import diff_states
from agentlog.widgets.scrubber import Scrubber


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return al.examples.sample_store(copy_to=tmp_path_factory.mktemp("scrub") / "store")


def expected_paths(run: Any, n: int) -> list[str]:
    return list(diff_states(run.state_at(n - 1), run.state_at(n)).paths)


def check(s: Scrubber, run: Any, n: int) -> None:
    s.goto(n)
    assert s.seq == n
    assert s.event.seq == n
    assert s.state == run.state_at(n)
    assert s.prev_state == run.state_at(n - 1)
    assert s.highlighted == expected_paths(run, n)
    assert list(s.patch.paths) == s.highlighted


def test_goto_every_seq_of_sre_in_order_and_in_random_orders(store: Any) -> None:
    run = store.run("sre-0001")
    s = Scrubber(run)
    for n in range(len(run)):
        check(s, run, n)
    for seed in (1, 2):
        order = list(range(len(run)))
        random.Random(seed).shuffle(order)
        fresh = Scrubber(run)
        for n in order:
            check(fresh, run, n)


def test_goto_a_sample_of_diligence_seqs_in_random_order(store: Any) -> None:
    run = store.run("diligence-0001")
    rnd = random.Random(7)
    seqs = rnd.sample(range(len(run)), 60) + [0, len(run) - 1]
    s = Scrubber(run, start=len(run) // 2)
    for n in seqs:
        check(s, run, n)
    assert any(s.goto(n).highlighted for n in seqs)  # something was highlighted


def test_stepping_forward_through_a_run_gives_the_states_of_run_states(store: Any) -> None:
    run = store.run("diligence-0001")
    s = Scrubber(run)
    seen = [s.state]
    while s.seq < len(run) - 1:
        seen.append(s.step(+1).state)
    assert seen == [state for _, state in run.states()]
    # and back again, one step at a time
    back = [s.state]
    while s.seq > 0:
        back.append(s.step(-1).state)
    assert back == seen[::-1]


def test_the_tree_highlights_what_the_event_changed(store: Any) -> None:
    run = store.run("diligence-0001")
    created = next(e.seq for e in run.iter_events() if e.type == "object.created")
    s = Scrubber(run, start=created)
    ident = s.event.payload["id"]
    assert f"/objects/{ident}" in s.highlighted
    assert f'class="al-st-hl" data-path="/objects/{ident}"' in s.state_html
    assert 'class="al-st-path" data-path="/objects"' in s.state_html


def test_next_and_previous_of_type_land_on_the_right_seqs(store: Any) -> None:
    run = store.run("sre-0001")
    types = [e.type for e in run.iter_events()]
    results = [i for i, t in enumerate(types) if t == "tool.result"]
    s = Scrubber(run)
    visited = []
    while (seq := s.next_of_type("tool.result")) is not None:
        visited.append(seq)
        assert s.event.type == "tool.result"
    assert visited == results
    assert s.seq == results[-1]
    assert s.prev_of_type("tool.result") == results[-2]
    s.goto(0)
    assert s.prev_of_type("tool.result") is None and s.seq == 0
    s.goto(results[2] - 1)
    assert s.next_of_type("tool.result") == results[2]
    assert "tool.result" in s.types and s.types == sorted(set(types))
    with pytest.raises(ValueError, match="no event of type 'tool.resultz'.*its types are"):
        s.next_of_type("tool.resultz")


def test_the_cause_link_jumps_to_caused_by(store: Any) -> None:
    run = store.run("sre-0001")
    caused = [e for e in run.iter_events() if e.caused_by is not None]
    assert caused
    s = Scrubber(run)
    for e in caused[:5]:
        s.goto(e.seq)
        assert f"seq {e.caused_by}" in s.event_html
        assert s.follow_cause() == e.caused_by
        assert s.state == run.state_at(e.caused_by)
    s.goto(0)
    assert s.event.caused_by is None and s.follow_cause() is None and s.seq == 0
    # the widget's cause button does the same
    s.goto(caused[0].seq)
    parts = s._parts()
    assert not parts.cause.disabled and str(caused[0].caused_by) in parts.cause.description
    parts.cause.click()
    assert s.seq == caused[0].caused_by
    assert parts.slider.value == s.seq


def test_out_of_range_seqs_name_the_run_and_the_seq(store: Any) -> None:
    run = store.run("sre-0001")
    s = Scrubber(run)
    with pytest.raises(EventNotFoundError, match=r"run 'sre-0001' has 78 events \(seq 0..77\); no seq 78"):
        s.goto(78)
    with pytest.raises(EventNotFoundError, match="no seq -1"):
        s.goto(-1)
    with pytest.raises(EventNotFoundError, match="no seq -1"):
        s.step(-1)
    with pytest.raises(TypeError, match="a seq is an int"):
        s.goto("3")  # type: ignore[arg-type]
    with pytest.raises(EventNotFoundError, match="sre-0001.*no seq 500"):
        Scrubber(run, start=500)
    assert s.seq == 0  # a failed move leaves the view where it was


@pytest.fixture(scope="module")
def hostile(store: Any) -> Any:
    """A run whose payloads, actor, state keys and values are HTML, one payload a blob."""
    w = store.create_run(run_id="hostile", durability="none")
    w.emit("run.started", {"inputs": "<img src=x onerror=alert(1)>"}, actor="<b>me</b>")
    w.emit("note", {"text": "<script>alert('x')</script>"}, caused_by=0)
    w.emit("state.patch", {"ops": [{"op": "add", "path": "/<script>", "value": "</details><script>1</script>"}]})
    w.emit("tool.result", {"key": "k", "name": "fetch", "result": "<p>" + "x" * 40_000}, caused_by=1)
    w.close("finished")
    return store.run("hostile")


def test_payloads_keys_and_values_are_escaped(hostile: Any) -> None:
    s = Scrubber(hostile)
    assert "<img" not in s.event_html and "&lt;img src=x" in s.event_html
    assert "<b>me" not in s.event_html and "&lt;b&gt;me" in s.event_html
    s.goto(1)
    assert "<script>" not in s.event_html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in s.event_html
    s.goto(2)
    assert "<script>" not in s.state_html and "</details><script>" not in s.state_html
    assert s.highlighted == ["/vars/<script>"]
    assert 'data-path="/vars/&lt;script&gt;"' in s.state_html
    static = s._repr_html_()
    assert static is not None and "<script>1" not in static


def test_a_blob_in_a_payload_is_previewed_and_expandable(hostile: Any) -> None:
    s = Scrubber(hostile, start=3)
    assert type(s.event.payload["result"]).__name__ == "BlobRef"
    assert "<blob sha256:" not in s.payload_text  # the raw JSON's marker is escaped text
    assert "&lt;blob sha256:" in s.payload_text
    assert '<details class="al-st-blob">' in s.payload_text
    assert "&lt;p&gt;xxx" in s.payload_text and "<p>x" not in s.payload_text
    # the event view reads the (small, textual) blob back as text, escaped, long text folded
    assert "&lt;p&gt;xxx" in s.event_html and "<p>x" not in s.event_html
    assert 'class="al-chat-more"' in s.event_html


def test_the_static_repr_shows_the_event_and_the_state_tree(store: Any) -> None:
    run = store.run("sre-0001")
    s = Scrubber(run, start=4)
    page = s._repr_html_()
    assert page is not None
    assert "llm.response" in page and 'class="al-st"' in page and "al-patch" in page
    assert s._repr_mimebundle_() is None  # no kernel here: the static HTML is used
    with al.widgets.set_options(display="text"):
        assert s._repr_html_() is None
    assert "seq 4 of 77" in s.text() and "/messages/-" in s.text()


def test_model_calls_read_as_a_conversation(store: Any) -> None:
    from agentlog.events import LLMRequest, LLMResponse
    run = store.run("sre-0001")
    s = Scrubber(run)
    request = s.goto(run.events.loc[run.events["type"] == "llm.request", "seq"].iloc[1]).event
    page = s.event_html
    messages = LLMRequest.of(request).messages
    assert page.count('class="al-chat-msg') + page.count('al-chat-result') >= len(messages)
    assert '<div class="al-chat-role">system</div>' in page and '<div class="al-chat-role">user</div>' in page
    assert "tools offered: get_alerts" in page
    assert "\\n" not in page and '\\"' not in page  # no JSON inside JSON
    answer = s.step(+1).event
    assert answer.type == "llm.response"
    call = LLMResponse.of(answer).tool_calls[0]["function"]
    assert f"→ call <b>{call['name']}</b>" in s.event_html
    # the arguments arrive as a JSON string: shown decoded, as indented JSON
    assert '<div class="al-chat-code">{\n  &quot;' in s.event_html


def test_the_cause_button_names_its_seq_and_messages_clear(store: Any) -> None:
    run = store.run("refunds-0001")
    answer = int(run.events.loc[run.events["type"] == "llm.response", "seq"].iloc[0])
    s = Scrubber(run, start=answer)
    parts = s._parts()
    assert s.event.caused_by is not None
    assert parts.cause.description == f"← caused by seq {s.event.caused_by}"
    parts.kinds.value = "run.started"
    parts.next_kind.click()
    assert "no run.started that way" in parts.message.value
    parts.forward.click()
    assert parts.message.value == ""  # cleared on the next move
    assert parts.tabs.titles[2] == f"Changed ({len(s.patch)})"


def test_the_widget_follows_the_view_and_the_marker_moves_without_a_new_figure(store: Any) -> None:
    run = store.run("refunds-0001")
    s = Scrubber(run)
    parts = s._parts()
    figure = s.figure
    assert figure is not None and len(figure.data) == 3
    s.goto(40)
    assert parts.slider.value == 40 and parts.seq_box.value == 40
    assert figure.layout.shapes[0].x0 == 40 and figure.layout.shapes[0].x1 == 40
    assert s.figure is figure
    assert parts.state.value.endswith(s.state_html + "</div>")
    parts.slider.value = 77
    assert s.seq == 77 and s.state == run.state_at(77) and parts.seq_box.value == 77
    parts.seq_box.value = 10
    assert s.seq == 10
    parts.forward.click()
    assert s.seq == 11
    parts.back.click()
    parts.back.click()
    assert s.seq == 9
    parts.kinds.value = "approval.requested"
    parts.next_kind.click()
    assert s.event.type == "approval.requested"
    parts.next_kind.click()
    assert "no approval.requested that way" in parts.message.value
    assert isinstance(s.widget, __import__("ipywidgets").VBox)
    cum = run.tokens_over_time()
    assert list(figure.data[0].x) == cum["seq"].tolist()


def test_run_scrub_is_a_scrubber(store: Any, tmp_path: Path) -> None:
    s = store.run("sre-0002").scrub(start=3)
    assert isinstance(s, Scrubber) and s.seq == 3
    assert repr(s) == f"<Scrubber sre-0002 seq 3 of {len(store.run('sre-0002')):,}>"


def test_the_readable_view_leaves_out_the_version_marker(tmp_path: Path) -> None:
    """An HTTP exchange (payload version 2) reads as its fields; ``"$v"`` stays in the raw panel."""
    import httpx

    from agentlog.events import VERSION_KEY

    server = httpx.MockTransport(lambda request: httpx.Response(200, json={"up": True}))
    run = al.record(lambda rec: al.transport.client(rec, transport=server).get("https://example.com/up").json(),
                    store=tmp_path / "s", name="http")
    seq = int(run.events.loc[run.events["type"] == "http.request", "seq"].iloc[0])
    assert run.event(seq).payload[VERSION_KEY] == 2
    s = Scrubber(run)
    s.goto(seq)
    assert "example.com/up" in s.event_html and "$v" not in s.event_html
