// agentlog span tree: rows in tree order, folded and unfolded here, a click sets `selected`.
function render({ model, el }) {
  el.classList.add("agentlog-spantree");
  const table = document.createElement("div");
  table.className = "al-tr";
  el.appendChild(table);
  function hidden(rows, folded) {
    // a row is hidden when any ancestor is folded
    const byId = new Map(rows.map((r) => [r.id, r]));
    return (r) => {
      let p = r.parent;
      while (p) {
        if (folded.has(p)) return true;
        p = byId.get(p)?.parent;
      }
      return false;
    };
  }
  function draw() {
    const rows = model.get("rows") || [];
    const folded = new Set(model.get("collapsed") || []);
    const selected = model.get("selected");
    const isHidden = hidden(rows, folded);
    table.replaceChildren();
    const head = document.createElement("div");
    head.className = "al-tr-row al-tr-head";
    for (const [cls, text] of [["al-tr-name", "span"], ["al-tr-kind", "kind"], ["al-tr-num", "duration"],
                               ["al-tr-num", "tokens"], ["al-tr-num", "cost"]]) {
      const c = document.createElement("span");
      c.className = cls;
      c.textContent = text;
      head.appendChild(c);
    }
    table.appendChild(head);
    for (const r of rows) {
      if (isHidden(r)) continue;
      const row = document.createElement("div");
      row.className = "al-tr-row" + (r.id === selected ? " al-tr-selected" : "") +
        (r.status === "error" ? " al-tr-error" : "");
      row.dataset.span = r.id;
      const name = document.createElement("span");
      name.className = "al-tr-name";
      name.style.paddingLeft = `${r.depth * 1.1}em`;
      const twisty = document.createElement("span");
      twisty.className = "al-tr-twisty";
      twisty.textContent = r.kids ? (folded.has(r.id) ? "▸" : "▾") : "";
      if (r.kids) {
        twisty.addEventListener("click", (ev) => {
          ev.stopPropagation();
          const now = new Set(model.get("collapsed") || []);
          if (now.has(r.id)) now.delete(r.id); else now.add(r.id);
          model.set("collapsed", [...now]);
          model.save_changes();
        });
      }
      name.appendChild(twisty);
      name.appendChild(document.createTextNode(r.name));
      row.appendChild(name);
      for (const [cls, text] of [["al-tr-kind", r.kind], ["al-tr-num", r.duration],
                                 ["al-tr-num", r.tokens], ["al-tr-num", r.cost]]) {
        const c = document.createElement("span");
        c.className = cls;
        c.textContent = text;
        row.appendChild(c);
      }
      row.addEventListener("click", () => {
        model.set("selected", r.id);
        model.save_changes();
      });
      table.appendChild(row);
    }
    el.querySelector(".al-tr-selected")?.scrollIntoView({ block: "nearest" });
  }
  model.on("change:rows", draw);
  model.on("change:collapsed", draw);
  model.on("change:selected", draw);
  draw();
}
export default { render };
