// The relations graph as SVG, laid out by a small force simulation (no library, no network):
// nodes repel, edges pull like springs, a weak pull keeps the graph centred. Drag a node to move it;
// click one to list its relations.
(function () {
  "use strict";
  const svg = document.getElementById("graph");
  const list = document.getElementById("relations");
  const NS = "http://www.w3.org/2000/svg";
  const W = svg.width.baseVal.value, H = svg.height.baseVal.value;
  const make = (tag, attrs, parent) => {
    const el = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    parent.appendChild(el);
    return el;
  };
  fetch(svg.dataset.source, { credentials: "same-origin" }).then((r) => r.json()).then((data) => {
    const nodes = data.nodes.map((name, i) => {
      const a = (2 * Math.PI * i) / data.nodes.length;  // a circle to start from: deterministic
      return { name, x: W / 2 + 180 * Math.cos(a), y: H / 2 + 180 * Math.sin(a), vx: 0, vy: 0, fixed: false };
    });
    const at = new Map(nodes.map((n) => [n.name, n]));
    const edges = data.edges.map((e) => ({ ...e, s: at.get(e.source), t: at.get(e.target) }));
    const lines = edges.map((e) => ({
      line: make("line", { class: e.current ? "edge" : "edge past", "marker-end": "url(#arrow)" }, svg),
      label: Object.assign(make("text", { class: "label", "text-anchor": "middle" }, svg), { textContent: e.relation }),
    }));
    const defs = make("defs", {}, svg);
    const marker = make("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 26, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" }, defs);
    make("path", { d: "M0,0 L10,5 L0,10 z", fill: "#667" }, marker);
    const groups = nodes.map((n) => {
      const g = make("g", { class: n.name === "user" ? "node user" : "node", "data-name": n.name }, svg);
      make("circle", { r: 16 }, g);
      Object.assign(make("text", { "text-anchor": "middle", dy: 30 }, g), { textContent: n.name });
      return g;
    });
    svg.dataset.nodes = String(nodes.length);
    svg.dataset.edges = String(edges.length);
    const draw = () => {
      edges.forEach((e, i) => {
        const { line, label } = lines[i];
        line.setAttribute("x1", e.s.x); line.setAttribute("y1", e.s.y);
        line.setAttribute("x2", e.t.x); line.setAttribute("y2", e.t.y);
        label.setAttribute("x", (e.s.x + e.t.x) / 2); label.setAttribute("y", (e.s.y + e.t.y) / 2 - 4);
      });
      nodes.forEach((n, i) => groups[i].setAttribute("transform", `translate(${n.x},${n.y})`));
    };
    const step = () => {
      for (const a of nodes) for (const b of nodes) {
        if (a === b) continue;
        const dx = a.x - b.x, dy = a.y - b.y, d2 = Math.max(dx * dx + dy * dy, 25);
        a.vx += (4000 * dx) / d2 / Math.sqrt(d2); a.vy += (4000 * dy) / d2 / Math.sqrt(d2);
      }
      for (const e of edges) {
        const dx = e.t.x - e.s.x, dy = e.t.y - e.s.y, d = Math.max(Math.hypot(dx, dy), 1), f = (d - 140) * 0.02;
        e.s.vx += (f * dx) / d; e.s.vy += (f * dy) / d; e.t.vx -= (f * dx) / d; e.t.vy -= (f * dy) / d;
      }
      for (const n of nodes) {
        n.vx += (W / 2 - n.x) * 0.005; n.vy += (H / 2 - n.y) * 0.005;
        if (!n.fixed) { n.x = Math.min(W - 30, Math.max(30, n.x + n.vx)); n.y = Math.min(H - 30, Math.max(30, n.y + n.vy)); }
        n.vx *= 0.6; n.vy *= 0.6;
      }
      draw();
    };
    let ticks = 0;
    const run = () => { step(); if (++ticks < 300) requestAnimationFrame(run); else svg.dataset.settled = "true"; };
    run();
    let dragged = null;
    const point = (ev) => { const r = svg.getBoundingClientRect(); return { x: ev.clientX - r.left, y: ev.clientY - r.top }; };
    groups.forEach((g, i) => {
      g.addEventListener("pointerdown", (ev) => { dragged = nodes[i]; dragged.fixed = true; g.setPointerCapture(ev.pointerId); });
      g.addEventListener("click", () => show(nodes[i].name));
    });
    svg.addEventListener("pointermove", (ev) => { if (dragged) { Object.assign(dragged, point(ev)); draw(); } });
    svg.addEventListener("pointerup", () => { dragged = null; });
    const show = (name) => {
      groups.forEach((g) => g.classList.toggle("picked", g.dataset.name === name));
      list.replaceChildren(...edges.filter((e) => e.source === name || e.target === name).map((e) => {
        const li = document.createElement("li");
        li.textContent = `${e.source} —${e.relation}→ ${e.target}${e.current ? "" : " (no longer holds)"}`;
        return li;
      }));
    };
  });
})();
