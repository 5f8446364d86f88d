"""One tabbed view of a run: ``al.show(run)`` (or ``run.show()``).

Tabs: *Overview* (the summary card), *Waterfall*, *Scrub*, *Cost*, *Graph* (the objects and
relations as a node-link diagram, as of the scrubber's event once the *Scrub* tab is open, with
each object's provenance on click: :class:`~agentlog.widgets.graph.GraphView`) and *Verify*.
Only the overview is built at once; every other tab is built the first time it is selected,
so ``show()`` on a large run returns at once and a tab nobody opens costs nothing.

:func:`graph_html` is a text outline of the same graph, for plain HTML.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, cast

import ipywidgets as widgets

from ..folding import thaw
from ._kernel import as_widget
from .costdash import CostDashboard
from .html import cut, obj_repr
from .html import esc as _e
from .waterfall import Waterfall

if TYPE_CHECKING:
    from ..store.run import Run

__all__ = ["TABS", "RunTabs", "graph_html", "show"]

#: The tab titles, in order.
TABS: Final = ("Overview", "Waterfall", "Scrub", "Cost", "Graph", "Verify")
OBJECT_LIMIT: Final = 300   # objects listed in the graph tab before "… N more"
DATA_CHARS: Final = 160     # characters of an object's data shown inline


def _relation_line(rel: Mapping[str, Any], me: str, labels: Mapping[str, str]) -> str:
    outgoing = rel.get("source") == me
    other = str(rel.get("target") if outgoing else rel.get("source"))
    arrow = "→" if outgoing else "←"
    name = labels.get(other, other)
    seq = (rel.get("provenance") or {}).get("event")
    at = f' <span class="al-muted">@{_e(seq)}</span>' if seq is not None else ""
    return f"<li>{arrow} <b>{_e(rel.get('kind', ''))}</b> <code>{_e(other)}</code> {_e(cut(name, 60))}{at}</li>"


def _label(obj: Mapping[str, Any]) -> str:
    data = obj.get("data") or {}
    for key in ("name", "title", "text", "question", "summary"):
        if isinstance(data, Mapping) and data.get(key):
            return str(data[key])
    return ""


def graph_html(objects: Mapping[str, Any], relations: Mapping[str, Any], *, limit: int = OBJECT_LIMIT) -> str:
    """The objects of a state grouped by kind, each with its relations, as escaped HTML.

    >>> objs = {"a": {"id": "a", "kind": "doc", "data": {"title": "<b>x</b>"}},
    ...         "b": {"id": "b", "kind": "claim", "data": {"text": "y"}}}
    >>> rels = {"r": {"id": "r", "kind": "cites", "source": "b", "target": "a"}}
    >>> out = graph_html(objs, rels)
    >>> "&lt;b&gt;x&lt;/b&gt;" in out and "<b>x</b>" not in out and "cites" in out
    True
    """
    objects, relations = thaw(objects), thaw(relations)
    by_object: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for rel in relations.values():
        by_object[str(rel.get("source"))].append(rel)
        by_object[str(rel.get("target"))].append(rel)
    labels = {str(o.get("id", k)): _label(o) for k, o in objects.items()}
    kinds: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for obj in objects.values():
        kinds[str(obj.get("kind", "?"))].append(obj)
    parts, shown = [], 0
    for kind in sorted(kinds):
        items = []
        for obj in sorted(kinds[kind], key=lambda o: str(o.get("id"))):
            if shown >= limit:
                break
            shown += 1
            oid = str(obj.get("id"))
            seq = (obj.get("provenance") or {}).get("event")
            rels = "".join(_relation_line(r, oid, labels) for r in by_object.get(oid, []))
            data = cut(str(obj.get("data", "")), DATA_CHARS)
            at = f' <span class="al-muted">@{_e(seq)}</span>' if seq is not None else ""
            items.append(f"<li><code>{_e(oid)}</code> {_e(cut(labels.get(oid, ''), 80))}{at}"
                         f'<details><summary class="al-muted">data</summary><pre>{_e(data)}</pre></details>'
                         f"{f'<ul>{rels}</ul>' if rels else ''}</li>")
        parts.append(f'<li class="al-section"><details open><summary>{_e(kind)} '
                     f'<span class="al-count">({len(kinds[kind]):,})</span></summary>'
                     f'<ul>{"".join(items)}</ul></details></li>')
    more = len(objects) - shown
    tail = f'<p class="al-more">… {more:,} more objects</p>' if more > 0 else ""
    head = (f'<div class="al-header"><span class="al-obj">agentlog.Graph</span>'
            f'<span class="al-title">{len(objects):,} objects, {len(relations):,} relations</span></div>')
    body = f'<ul class="al-sections">{"".join(parts)}</ul>{tail}' if objects else "<p>no objects</p>"
    return obj_repr(f"{len(objects)} objects, {len(relations)} relations", head, body)


def _graph_view(tabs: RunTabs) -> widgets.Widget:
    from .graph import GraphView
    run = tabs.run
    if len(run) == 0:
        return widgets.HTML("<p>no events</p>")
    view = GraphView(run)
    tabs.views["Graph"] = view
    tabs._link_graph()
    return view.widget()


def _html_view(text: str | None, fallback: str) -> widgets.Widget:
    return widgets.HTML(text if text is not None else f"<pre>{_e(fallback)}</pre>")


def _verify_view(run: Run) -> widgets.Widget:
    report = run.verify()  # reads every event: once
    return _html_view(report._repr_html_(), repr(report))


class RunTabs(widgets.Tab):  # type: ignore[misc]
    """The tabs of :func:`show`; a tab's view is built when it is first selected.

    Attributes:
        run: the run shown.
        built: the titles of the tabs built so far.
    """

    def __init__(self, run: Run, *, reducers: Any = None, start: int | None = None,
                 tab: str = "Overview") -> None:
        self.run = run
        self.built: set[str] = set()
        self.views: dict[str, Any] = {}
        self._makers: dict[str, Callable[[], widgets.Widget]] = {
            "Overview": lambda: _html_view(run._repr_html_(), repr(run)),
            "Waterfall": lambda: self._keep("Waterfall", Waterfall(run)),
            "Scrub": lambda: self._scrubber(reducers, start),
            "Cost": lambda: self._keep("Cost", CostDashboard(run)),
            "Graph": lambda: _graph_view(self),
            "Verify": lambda: _verify_view(run),
        }
        placeholders = [widgets.HTML(f"<p class='al-muted'>loading {t.lower()}…</p>") for t in TABS]
        super().__init__(children=placeholders, titles=TABS)
        self.add_class("agentlog-show")
        if tab not in TABS:
            raise ValueError(f"no tab {tab!r}; the tabs are {', '.join(TABS)}")
        self.observe(self._on_select, names="selected_index")
        self.build("Overview")
        self.selected_index = TABS.index(tab)  # builds that tab (the observer)

    def __repr__(self) -> str:
        return f"<RunTabs {self.run.id} built={sorted(self.built)}>"

    def _keep(self, title: str, view: Any) -> widgets.Widget:
        self.views[title] = view
        return as_widget(view)

    def _scrubber(self, reducers: Any, start: int | None) -> widgets.Widget:
        from .scrubber import Scrubber
        made = self._keep("Scrub", Scrubber(self.run, reducers=reducers, start=start))
        self._link_graph()
        return made

    def _link_graph(self) -> None:
        """Once both exist, the graph is drawn as of the scrubber's event."""
        graph, scrub = self.views.get("Graph"), self.views.get("Scrub")
        if graph is not None and scrub is not None and not getattr(self, "_linked", False):
            graph.link_to(scrub)
            self._linked = True

    def build(self, title: str) -> widgets.Widget:
        """Build the tab ``title`` now (if not built yet) and return its widget."""
        i = TABS.index(title)
        if title not in self.built:
            try:
                view = self._makers[title]()
            except Exception as exc:  # noqa: BLE001 - a broken tab must not break the others
                view = widgets.HTML(f"<pre style='color:#b00020'>{_e(title)}: {_e(type(exc).__name__)}: "
                                    f"{_e(exc)}</pre>")
            children = list(self.children)  # type: ignore[has-type]
            children[i] = view
            self.children = children
            self.built.add(title)
        return cast("widgets.Widget", self.children[i])

    def _on_select(self, change: Mapping[str, Any]) -> None:
        index = change["new"]
        if index is not None and 0 <= index < len(TABS):
            self.build(TABS[index])


def show(run: Run, **options: Any) -> RunTabs:
    """One tabbed view of ``run``: Overview, Waterfall, Scrub, Cost, Graph, Verify.

    Args:
        run: the run.
        **options: ``tab`` (the tab selected first), ``reducers`` and ``start`` (for the
            scrubber).

    Returns:
        A :class:`RunTabs` (an ``ipywidgets.Tab``); tabs other than the overview are built
        when first selected.
    """
    return RunTabs(run, **options)
