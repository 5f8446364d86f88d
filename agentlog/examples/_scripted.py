"""What the example agents share: a scripted model, a clock for reproducible runs, and the
usual chat-with-tools loop as a pure ``next_step``.

- :class:`ScriptedModel` stands in for an LLM. It reads its context (the request's messages)
  and answers by rules, in the OpenAI Chat Completions shape, with token counts computed
  from the text (about four characters a token), so an edited fork sees a different answer.
- :class:`SampleClock` ticks deterministically; models and tools advance it by their
  latency, so a regenerated run is byte-identical and its waterfall looks like a real one.
- :class:`ChatAgent` is the loop most agents are: ask the model; run the tool calls it asked
  for (some behind an approval); hand the results back; finish when it answers in prose.

Pure except for the clock, which only the model and tools touch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..capture.runtime import CallModel, CallTool, Finish
from ..folding import thaw
from ..keys import llm_key

__all__ = ["Answer", "ChatAgent", "SampleClock", "ScriptedModel", "tokens", "tool_results"]

#: 2026-07-02T08:30:00Z: the sample runs happen on one morning.
SAMPLE_T0 = 1_782_981_000.0


class SampleClock:
    """A clock that ticks ``step`` seconds per read; :meth:`advance` simulates latency.

    >>> c = SampleClock(100.0, step=0.5)
    >>> c(), c(), (c.advance(2.0), c())[1]
    (100.0, 100.5, 103.0)
    """

    def __init__(self, start: float = SAMPLE_T0, step: float = 0.003) -> None:
        self.now, self.step = start, step

    def __call__(self) -> float:
        value = self.now
        self.now += self.step
        return value

    def advance(self, seconds: float) -> None:
        """Let time pass (a model thinking, a tool waiting on the network)."""
        self.now += seconds


def tokens(text: Any) -> int:
    """A deterministic token count: about four characters a token.

    >>> tokens("Check the alerts first."), tokens(None)
    (6, 0)
    """
    if text is None:
        return 0
    return math.ceil(len(text if isinstance(text, str) else json.dumps(text)) / 4)


@dataclass(frozen=True, slots=True)
class Answer:
    """What a scripted model says: text, and maybe tool calls ``(name, args)``."""

    content: str
    calls: Sequence[tuple[str, Mapping[str, Any]]] = field(default_factory=tuple)


class ScriptedModel:
    """A rule-based stand-in for a chat model, answering in the OpenAI Chat Completions shape.

    Args:
        model: the catalog model it reports (so costs are priced like the real one's).
        rules: ``rules(messages) -> Answer | str``; reads the conversation, decides.
        clock: advanced by ``latency`` plus a little per output token.
        latency: seconds per call before the first token.

    >>> m = ScriptedModel("gpt-4o-mini", lambda messages: "hello")
    >>> r = m({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    >>> r["choices"][0]["message"]["content"], r["usage"]["completion_tokens"]
    ('hello', 2)
    """

    def __init__(self, model: str, rules: Callable[[list[dict[str, Any]]], Answer | str], *,
                 clock: SampleClock | None = None, latency: float = 0.6) -> None:
        self.model, self.rules, self.clock, self.latency = model, rules, clock, latency
        self.calls = 0

    def __call__(self, request: Mapping[str, Any]) -> dict[str, Any]:
        self.calls += 1
        messages = [dict(m) for m in request.get("messages") or []]
        answer = self.rules(messages)
        if isinstance(answer, str):
            answer = Answer(answer)
        key = llm_key(request)
        message: dict[str, Any] = {"role": "assistant", "content": answer.content}
        if answer.calls:
            message["tool_calls"] = [
                {"id": f"call_{key[:8]}_{i}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(dict(args), sort_keys=True)}}
                for i, (name, args) in enumerate(answer.calls)]
        prompt = sum(tokens(m.get("content")) + 4 for m in messages) + tokens(request.get("tools") or None)
        completion = tokens(answer.content) + sum(tokens(c["function"]["arguments"]) + 3
                                                  for c in message.get("tool_calls", []))
        if self.clock is not None:
            self.clock.advance(self.latency + 0.012 * completion)
        return {"id": f"chatcmpl-{key[:20]}", "object": "chat.completion", "model": self.model,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if answer.calls else "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}}


def tool_results(messages: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """The tool results a conversation holds, by tool name, parsed from JSON when they are.

    >>> msgs = [{"role": "assistant", "content": "", "tool_calls": [
    ...     {"id": "c1", "type": "function", "function": {"name": "cpu", "arguments": "{}"}}]},
    ...     {"role": "tool", "tool_call_id": "c1", "content": "0.9"}]
    >>> tool_results(msgs)
    {'cpu': [0.9]}
    """
    names = {c["id"]: c["function"]["name"] for m in messages if m.get("role") == "assistant"
             for c in m.get("tool_calls") or []}
    found: dict[str, list[Any]] = {}
    for m in messages:
        if m.get("role") == "tool":
            text = m.get("content")
            try:
                value = json.loads(text) if isinstance(text, str) else text
            except ValueError:
                value = text
            found.setdefault(names.get(m.get("tool_call_id"), "?"), []).append(value)
    return found


def _tool_message(call_id: str, content: Any) -> dict[str, Any]:
    text = content if isinstance(content, str) else json.dumps(content, sort_keys=True)
    return {"role": "tool", "tool_call_id": call_id, "content": text}


class ChatAgent:
    """The chat-with-tools loop as a pure ``next_step``.

    Ask the model with the conversation so far; when it asks for tools, run them one by one
    (a call :meth:`gate` names a reason for waits for a person); hand every result back (a
    denial too, as the tool's answer); when it answers without tool calls, :meth:`finish`.

    Subclasses set ``name``, ``model``, ``system``, ``tools_spec`` and override
    :meth:`opening` (the first user message), and maybe :meth:`gate` and :meth:`finish`.
    """

    name = "chat-agent"
    model = "gpt-4o-mini"
    system = "You are a helpful agent."
    tools_spec: Sequence[Mapping[str, Any]] = ()

    def opening(self, state: Any) -> list[dict[str, Any]]:
        """The first messages after the system prompt."""
        return [{"role": "user", "content": json.dumps(thaw(state["input"]))}]

    def continues(self, state: Any, answer: Any) -> bool:
        """False when the model's last answer belongs to an earlier conversation (start anew)."""
        return True

    def gate(self, name: str, args: Mapping[str, Any]) -> str | None:
        """A reason when the call needs a person's approval, else ``None``."""
        return None

    def finish(self, state: Any, answer: str) -> Any:
        """The step after the model's final answer (default: finish with it)."""
        return Finish({"answer": answer})

    def request(self, messages: list[dict[str, Any]]) -> CallModel:
        """The model request for a conversation."""
        request: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0}
        if self.tools_spec:
            request["tools"] = [dict(t) for t in self.tools_spec]
        return CallModel(request)

    def next_step(self, state: Any) -> Any:
        answer = state["loop"]["answer"]
        if answer is None or not self.continues(state, answer):
            return self.request([{"role": "system", "content": self.system}, *self.opening(state)])
        calls = thaw(answer["tool_calls"])
        if not calls:
            return self.finish(state, str(answer["content"]))
        done = iter([t for t in state["tools"] if t["answer"] == answer["seq"]])
        replies = []
        for call in calls:  # in order: each result, or denial, answers its call
            name, args = call["function"]["name"], json.loads(call["function"]["arguments"])
            denial = _denial(state, name, args)
            if denial is not None:
                replies.append(_tool_message(call["id"], denial))
                continue
            result = next(done, None)
            if result is not None:
                replies.append(_tool_message(call["id"], thaw(result["result"]) if result["error"] is None
                                             else {"error": result["error"]}))
                continue
            reason = self.gate(name, args)
            return CallTool(name, args, needs_approval=reason is not None, reason=reason or "")
        return self.request([*thaw(state["messages"]), *replies])


def _denial(state: Any, name: str, args: Mapping[str, Any]) -> dict[str, Any] | None:
    """The decision that denied this very call, as the tool's answer, or ``None``."""
    for entry in state["approvals"]["decided"].values():
        action = entry["action"]
        if (entry["decision"] == "denied" and isinstance(action, Mapping) and action.get("tool") == name
                and thaw(action.get("args")) == dict(args)):
            return {"denied": True, "by": entry["by"], "note": entry["note"]}
    return None
