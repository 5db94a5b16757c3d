// The loopctl timeline page (loopctl_sim/view/html.py inlines this file).
//
// The data is embedded in two gzip+base64 blocks: the index (lanes, items, the records' labels,
// the summary, a divergence), unpacked at load, and the records' JSON, unpacked on the first
// click. Rendering is virtualised so 100,000 records stay quick: each lane draws only the items
// inside the visible window, and a lane with more than MAX_ITEMS of them there draws a density
// histogram instead ("zoom in to see records"); the record list draws only its visible rows.
//
// Every string here comes from a trace, and a trace may be crafted: nothing is ever parsed as
// HTML. Elements are built with h() (text goes in as text nodes, attributes through setAttribute,
// positions through the CSSOM), and a class made from a trace's kind keeps only [A-Za-z0-9_-].
// The page's Content-Security-Policy allows this script and the stylesheet by hash alone.
"use strict";

const MAX_ITEMS = 1500; // per lane, in the visible window
const ROW_H = 20; // the record list's row height (px)
const BAR_H = 16; // one row of bars in a lane (px)

// An element: attrs may hold class, text, style (an object for the CSSOM), dataset, or any
// attribute; children are nodes or strings (strings become text nodes, never markup).
function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key === "style") Object.assign(node.style, value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children) if (child !== null && child !== undefined && child !== false) node.append(child);
  return node;
}

// A trace's kind or tone as one class name: letters, digits, "_" and "-" only.
function token(text) {
  return String(text).replace(/[^A-Za-z0-9_-]/g, "_");
}

async function unpack(id) {
  const text = document.getElementById(id).textContent.trim();
  const bin = atob(text);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return await new Response(stream).text();
}

function bisect(order, values, x) {
  // the first position in `order` whose value is > x (values[order[k]] is non-decreasing)
  let lo = 0, hi = order.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (values[order[mid]] <= x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

async function main() {
  const started = performance.now();
  const D = JSON.parse(await unpack("data-index"));
  const unpacked = performance.now();
  const R = D.recs, I = D.items, lanes = D.lanes, S = D.summary;
  const nItems = I.lane.length, nRecs = R.seq.length;
  const el = (id) => document.getElementById(id);

  // --- the header: outcome and counts -------------------------------------------------------
  const outcome = el("outcome");
  outcome.textContent = S.outcome;
  outcome.className = token(S.outcome_kind);
  const counts = [
    ["records", "records"], ["runs", "runs"], ["resumes", "resumes"], ["forks", "forks"],
    ["crashes", "crashes"],
    ["turns", "turns"], ["model_calls", "model calls"], ["model_errors", "model errors"],
    ["retries", "retries"], ["tool_calls", "tool calls"], ["tool_errors", "tool errors"],
    ["compactions", "compactions"], ["cancels", "cancels"],
  ];
  el("summary").replaceChildren(
    ...counts.map(([key, name]) =>
      h("li", { "data-testid": `count-${key}` }, h("b", { text: S[key] }), ` ${name}`)),
    ...(S.timed
      ? [h("li", { "data-testid": "duration" }, h("b", { text: Number(S.duration_s).toFixed(3) }), " s")]
      : []));

  // --- indexes ------------------------------------------------------------------------------
  const itemOf = new Int32Array(nRecs).fill(-1);
  for (let i = 0; i < nItems; i++) {
    if (itemOf[I.rec[i]] < 0) itemOf[I.rec[i]] = i;
    if (I.rec2[i] >= 0 && itemOf[I.rec2[i]] < 0) itemOf[I.rec2[i]] = i;
  }
  const laneItems = lanes.map(() => []);
  for (let i = 0; i < nItems; i++) laneItems[I.lane[i]].push(i);
  const rows = lanes.map((_, l) => 1 + laneItems[l].reduce((m, i) => Math.max(m, I.row[i]), 0));
  const maxLen = { time: [], order: [] };
  for (let l = 0; l < lanes.length; l++) {
    let t = 0, s = 0;
    for (const i of laneItems[l]) {
      t = Math.max(t, I.t1[i] - I.t0[i]);
      s = Math.max(s, I.s1[i] - I.s0[i]);
    }
    maxLen.time.push(t); maxLen.order.push(s);
  }
  const seqIndex = (seq) => (R.seq[seq] === seq ? seq : R.seq.indexOf(seq));

  // --- lanes --------------------------------------------------------------------------------
  let axis = S.timed ? "time" : "order";
  const starts = () => (axis === "time" ? I.t0 : I.s0);
  const ends = () => (axis === "time" ? I.t1 : I.s1);
  const box = el("lanes");
  const tracks = [];
  lanes.forEach((name, l) => {
    const track = h("div", { class: "track", style: { height: `${rows[l] * BAR_H + 4}px` } });
    const lane = h("div", { class: `lane lane-${token(name)}`, dataset: { lane: name, testid: "lane" } },
      h("div", { class: "lane-name", text: name }), track);
    if (!laneItems[l].length && name === "other") lane.hidden = true;
    box.appendChild(lane);
    tracks.push(track);
  });

  let view = { a: 0, b: 1 };
  function fit() {
    const st = starts(), en = ends();
    let lo = Infinity, hi = -Infinity;
    for (let i = 0; i < nItems; i++) { lo = Math.min(lo, st[i]); hi = Math.max(hi, en[i]); }
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    if (hi <= lo) hi = lo + 1;
    const pad = (hi - lo) * 0.01;
    view = { a: lo - pad, b: hi + pad };
  }

  let selected = -1; // a record index
  const divergent = D.divergence ? seqIndex(D.divergence.seq) : -1;

  function render() {
    const st = starts(), en = ends();
    const span = view.b - view.a;
    let shown = 0, dense = 0;
    tracks.forEach((track, l) => {
      const order = laneItems[l];
      if (!order.length) return;
      const W = track.clientWidth || 800;
      const lo = bisect(order, st, view.a - maxLen[axis][l] - 1e-12);
      const hi = bisect(order, st, view.b);
      const name = lanes[l];
      if (hi - lo > MAX_ITEMS) {
        dense++;
        const n = Math.max(1, Math.floor(W / 3));
        const buckets = new Uint32Array(n);
        for (let k = lo; k < hi; k++) {
          const x = Math.floor(((st[order[k]] - view.a) / span) * n);
          if (x >= 0 && x < n) buckets[x]++;
        }
        const top = buckets.reduce((m, c) => Math.max(m, c), 1);
        const H = rows[l] * BAR_H + 4;
        const bars = document.createDocumentFragment();
        for (let x = 0; x < n; x++) {
          if (!buckets[x]) continue;
          const height = Math.max(2, Math.round((buckets[x] / top) * H));
          bars.append(h("div", { class: "bucket", style: { left: `${x * 3}px`, width: "3px", height: `${height}px` } }));
        }
        track.replaceChildren(bars);
        track.dataset.mode = "density";
        return;
      }
      const bars = document.createDocumentFragment();
      for (let k = lo; k < hi; k++) {
        const i = order[k];
        if (en[i] < view.a) continue;
        const r = I.rec[i];
        const left = ((st[i] - view.a) / span) * W;
        const width = ((en[i] - st[i]) / span) * W;
        const point = width < 3 && en[i] === st[i];
        const toneOf = I.rec2[i] >= 0 && name === "tools" ? R.tone[I.rec2[i]] : R.tone[r];
        const tone = toneOf ? ` tone-${token(toneOf)}` : "";
        const cls = `item kind-${token(R.kind[r])}${tone}${point ? " point" : ""}` +
          (r === selected || I.rec2[i] === selected && selected >= 0 ? " sel" : "") +
          (r === divergent || I.rec2[i] === divergent && divergent >= 0 ? " divergent" : "");
        const label = I.rec2[i] >= 0 && name === "tools" ? R.label[I.rec2[i]] : R.label[r];
        bars.append(h("div", {
          class: cls,
          dataset: { i: i, lane: name },
          style: {
            left: `${(point ? left - 1 : left).toFixed(1)}px`,
            width: `${Math.max(point ? 3 : 2, width).toFixed(1)}px`,
            top: `${I.row[i] * BAR_H + 2}px`,
          },
          title: `seq ${R.seq[r]}: ${label}`,
        }));
        shown++;
      }
      track.replaceChildren(bars);
      track.dataset.mode = "items";
    });
    el("mode").textContent = dense
      ? `${dense} lane(s) as density: zoom in to see records`
      : `${shown} items shown`;
    const unit = axis === "time" ? "s" : "records";
    const fmt = (v) => (axis === "time" ? v.toFixed(4) : Math.round(v));
    el("window").textContent = `${fmt(Math.max(view.a, 0))} - ${fmt(view.b)} ${unit}`;
    el("axis-time").classList.toggle("on", axis === "time");
    el("axis-order").classList.toggle("on", axis === "order");
  }

  function zoom(factor, at) {
    const x = view.a + (view.b - view.a) * at;
    view = { a: x - (x - view.a) * factor, b: x + (view.b - x) * factor };
    render();
  }

  function focus(item) {
    const st = starts(), en = ends();
    const a = Math.max(0, item - 60), b = Math.min(nItems - 1, item + 60);
    let lo = st[a], hi = en[a];
    for (let k = a; k <= b; k++) hi = Math.max(hi, en[k]);
    if (hi <= lo) hi = lo + 1;
    const pad = (hi - lo) * 0.05;
    view = { a: lo - pad, b: hi + pad };
  }

  el("axis-time").onclick = () => { axis = "time"; fit(); render(); };
  el("axis-order").onclick = () => { axis = "order"; fit(); render(); };
  el("axis-time").disabled = !S.timed;
  el("zoom-in").onclick = () => zoom(0.5, 0.5);
  el("zoom-out").onclick = () => zoom(2, 0.5);
  el("zoom-fit").onclick = () => { fit(); render(); };
  box.addEventListener("wheel", (e) => {
    e.preventDefault();
    const track = tracks.find((t) => t.clientWidth) || box;
    const rect = track.getBoundingClientRect();
    const at = Math.min(1, Math.max(0, (e.clientX - rect.left) / rect.width));
    zoom(e.deltaY > 0 ? 1.25 : 0.8, at);
  }, { passive: false });
  let drag = null;
  box.addEventListener("mousedown", (e) => { drag = { x: e.clientX, view, moved: false }; });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const W = (tracks.find((t) => t.clientWidth) || box).clientWidth;
    const dx = e.clientX - drag.x;
    if (Math.abs(dx) > 3) drag.moved = true;
    if (!drag.moved) return;
    const shift = (dx / W) * (drag.view.b - drag.view.a);
    view = { a: drag.view.a - shift, b: drag.view.b - shift };
    render();
  });
  window.addEventListener("mouseup", (e) => {
    const was = drag;
    drag = null;
    if (was && !was.moved && e.target.classList && e.target.classList.contains("item")) {
      const i = Number(e.target.dataset.i);
      select(I.rec[i], false);
    }
  });
  window.addEventListener("resize", () => render());

  // --- the record list ----------------------------------------------------------------------
  const list = el("list"), spacer = el("list-spacer");
  let shownRecs = null; // null: every record; else an array of record indexes
  const listLength = () => (shownRecs ? shownRecs.length : nRecs);
  function drawRows() {
    const n = listLength();
    spacer.style.height = `${n * ROW_H}px`;
    const first = Math.max(0, Math.floor(list.scrollTop / ROW_H) - 5);
    const last = Math.min(n, first + Math.ceil((list.clientHeight || 400) / ROW_H) + 10);
    const rowsShown = document.createDocumentFragment();
    for (let k = first; k < last; k++) {
      const r = shownRecs ? shownRecs[k] : k;
      const cls = `row${R.tone[r] ? ` tone-${token(R.tone[r])}` : ""}${r === selected ? " sel" : ""}` +
        (r === divergent ? " divergent" : "");
      rowsShown.append(h("div", { class: cls, dataset: { r: r }, style: { top: `${k * ROW_H}px` } },
        h("span", { class: "seq", text: R.seq[r] }),
        h("span", { class: "lane-tag", text: lanes[R.lane[r]] }),
        R.label[r]));
    }
    spacer.replaceChildren(rowsShown);
    el("list-count").textContent = shownRecs ? `${n} of ${nRecs}` : `${nRecs} records`;
  }
  list.addEventListener("scroll", drawRows);
  spacer.addEventListener("click", (e) => {
    const row = e.target.closest(".row");
    if (row) select(Number(row.dataset.r), true);
  });
  let filterTimer = 0;
  el("filter").addEventListener("input", () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => {
      const q = el("filter").value.trim().toLowerCase();
      shownRecs = null;
      if (q) {
        shownRecs = [];
        for (let r = 0; r < nRecs; r++) {
          if (R.kind[r].toLowerCase() === q || lanes[R.lane[r]] === q ||
              R.label[r].toLowerCase().includes(q)) shownRecs.push(r);
        }
      }
      list.scrollTop = 0;
      drawRows();
    }, 120);
  });

  // --- details ------------------------------------------------------------------------------
  let recordLines = null;
  async function recordJson(r) {
    if (!recordLines) recordLines = (await unpack("data-records")).split("\n");
    return JSON.stringify(JSON.parse(recordLines[r]), null, 2);
  }
  async function select(r, fromList) {
    if (r < 0) return;
    selected = r;
    const item = itemOf[r];
    if (fromList && item >= 0) {
      const st = starts(), en = ends();
      if (st[item] < view.a || en[item] > view.b) focus(item);
    }
    render();
    if (!fromList) {
      const k = shownRecs ? shownRecs.indexOf(r) : r;
      if (k >= 0) list.scrollTop = Math.max(0, k * ROW_H - list.clientHeight / 2);
    }
    drawRows();
    const shown = [r];
    if (item >= 0) for (const x of [I.rec[item], I.rec2[item]]) if (x >= 0 && !shown.includes(x)) shown.push(x);
    shown.sort((x, y) => x - y);
    const parts = [];
    for (const x of shown) {
      parts.push(
        h("h3", { text: `seq ${R.seq[x]} · ${lanes[R.lane[x]]} · ${R.kind[x]} · turn ${R.turn[x]}` }),
        h("p", { text: R.label[x] }),
        h("pre", { "data-testid": "record-json", text: await recordJson(x) }));
    }
    el("details").replaceChildren(...parts);
  }

  // --- a divergence -------------------------------------------------------------------------
  if (D.divergence) {
    const d = D.divergence;
    const side = (v, absent, excerpt) => (absent ? "(absent)" : excerpt != null ? excerpt : JSON.stringify(v));
    const fields = (d.fields || []).map((f) => h("tr", null,
      h("td", { text: f.where || f.path || "(the value)" }),
      h("td", { class: "expected", text: side(f.expected, f.expected_absent, f.expected_excerpt) }),
      h("td", { class: "actual", text: side(f.actual, f.actual_absent, f.actual_excerpt) })));
    const policy = d.policy
      ? Object.entries(d.policy).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ")
      : "(no step before it)";
    const feeds = (d.recent_feeds || []).map((f) =>
      h("li", { text: `seq ${f.seq} (line ${f.line}): ${f.name}` }));
    const sec = el("divergence");
    sec.replaceChildren(
      h("h2", { text: `Divergence at seq ${d.seq} (line ${d.line}): ${d.message}` }),
      h("div", null, "what differs: ", h("b", { text: d.what }), d.note ? ` · note: ${d.note}` : null),
      ...(d.details || []).length ? [h("pre", { class: "details", text: d.details.join("\n") })] : [],
      h("div", { "data-testid": "policy", text: `policy in force: ${policy}` }),
      fields.length
        ? h("table", { "data-testid": "fields" },
          h("tr", null, h("th", { text: "field" }), h("th", { text: "expected" }), h("th", { text: "actual" })),
          ...fields)
        : null,
      h("div", { class: "sides" },
        h("div", null, h("b", { text: "expected" }), h("pre", { text: JSON.stringify(d.expected, null, 2) })),
        h("div", null, h("b", { text: "actual" }), h("pre", { text: JSON.stringify(d.actual, null, 2) }))),
      ...feeds.length ? [h("div", { text: "feeds before it:" }), h("ul", null, ...feeds)] : [],
      divergent >= 0 ? h("button", { type: "button", id: "goto-divergence", text: "show the record" }) : null);
    sec.hidden = false;
    if (divergent >= 0) el("goto-divergence").onclick = () => select(divergent, true);
  }

  fit();
  if (divergent >= 0 && itemOf[divergent] >= 0) focus(itemOf[divergent]);
  render();
  drawRows();
  performance.mark("loopctl-first-render");
  window.loopctlTimings = { unpack_ms: unpacked - started, render_ms: performance.now() - unpacked };
  document.body.dataset.ready = "1";
  if (divergent >= 0) await select(divergent, false);
}

main().catch((err) => {
  document.body.dataset.ready = "error";
  document.body.prepend(h("pre", { text: `The timeline could not be drawn: ${err && err.stack ? err.stack : err}` }));
});
