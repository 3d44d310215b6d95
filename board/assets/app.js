// cde board: the page of `cde-run board`. Plain JavaScript, no build step,
// nothing fetched but this server's JSON API (board/board.go lists it).
// It polls every 2 s and redraws only what changed.
"use strict";

const POLL_MS = 2000;
const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#6b6ecf", "#17becf", "#bcbd22"];
const DEFAULT_RUN_METRICS = [/^val\/mean\/avg@\d+$/, /^reward\/acc$/, /^rollout\/entropy$/, /^actor\/loss$/];
const DEFAULT_BENCH_METRICS = [/^val\/mean\/avg@\d+$/, /^reward\/acc$/, /^rollout\/entropy$/];

const state = {
  list: null,       // /api/list
  route: null,      // {view, ids, metrics}
  chartOpts: { log: false, smooth: 0, perSeed: false }, // from the address
  zoom: {},         // the x range zoomed to, by chart group
  view: null,       // the current view's state
  checked: new Set(),
  failures: 0,
};

// ---------- helpers ----------

function esc(s) {
  return String(s).replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

// fmt shows a number with up to `digits` significant digits (6 by default).
function fmt(v, digits) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (!Number.isFinite(v)) return String(v);
  return String(Number(v.toPrecision(digits || 6)));
}

function fmtDur(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return "";
  s = Math.max(0, Math.round(s));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
}

async function api(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (Array.isArray(v)) v.forEach(x => q.append(k, x)); else q.append(k, v);
  }
  const r = await fetch("api/" + path + "?" + q.toString(), { cache: "no-store" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function el(id) { return document.getElementById(id); }

function color(i) { return PALETTE[i % PALETTE.length]; }
function dash(i) { return i >= PALETTE.length ? "5 3" : ""; }

function pickDefaults(names, prefs) {
  const out = [];
  for (const re of prefs) {
    const m = names.find(n => re.test(n));
    if (m && !out.includes(m)) out.push(m);
  }
  if (out.length === 0 && names.length) out.push(names[0]);
  return out;
}

// shortLabels drops the leading path segments that names share.
function shortLabels(names) {
  if (names.length < 2) return names.slice();
  const parts = names.map(n => n.split("/"));
  let k = 0;
  while (parts.every(p => p.length > k + 1 && p[k] === parts[0][k])) k++;
  return parts.map(p => p.slice(k).join("/"));
}

function badge(s) { return `<span class="badge ${esc(s)}">${esc(s)}</span>`; }

// ---------- routing ----------

// #/ | #/bench/ID[?m=a,b] | #/runs/ID,ID[?m=a,b]
function parseRoute() {
  const h = location.hash.replace(/^#\/?/, "");
  const [path, query] = h.split("?");
  const params = new URLSearchParams(query || "");
  const metrics = params.get("m") ? params.get("m").split(",").filter(Boolean) : null;
  const sm = Number(params.get("smooth") || 0);
  state.chartOpts = { log: params.get("log") === "1", smooth: sm >= 0 && sm < 1 ? sm : 0, perSeed: params.get("seeds") === "1" };
  const parts = path.split("/");
  if (parts[0] === "bench" && parts[1]) return { view: "bench", ids: [decodeURIComponent(parts.slice(1).join("/"))], metrics };
  if (parts[0] === "runs" && parts[1]) return { view: "runs", ids: parts.slice(1).join("/").split(",").map(decodeURIComponent), metrics };
  return { view: "home", ids: [], metrics: null };
}

function benchHref(id) { return "#/bench/" + encodeURIComponent(id); }
function runsHref(ids) { return "#/runs/" + ids.map(encodeURIComponent).join(","); }

function routeChanged() {
  state.route = parseRoute();
  state.view = null;
  state.zoom = {};
  dropCharts(el("main"));
  el("main").innerHTML = '<p class="muted">Loading…</p>';
  document.body.dataset.ready = "";
  renderSide();
  refresh();
}

// ---------- the side bar ----------

function renderSide() {
  const l = state.list;
  if (!l) return;
  el("dirs").textContent = l.dirs.join("  ");
  const f = el("filter").value.trim().toLowerCase();
  const cur = state.route ? state.route.ids : [];
  const benches = [], runs = [];
  for (const it of l.items) {
    if (f && !it.name.toLowerCase().includes(f)) continue;
    if (it.kind === "bench") {
      const c = it.counts || {};
      benches.push(`<li class="${cur.includes(it.id) ? "current" : ""}" data-id="${esc(it.id)}"><span class="dot ${esc(it.state)}"></span>` +
        `<a href="${benchHref(it.id)}" title="${esc(it.name)}">${esc(it.name)}</a><span class="sub">${c.done || 0}/${it.cells || 0}</span></li>`);
    } else {
      const step = it.step !== undefined ? fmt(it.step) + (it.total ? "/" + it.total : "") : "";
      runs.push(`<li class="${cur.includes(it.id) ? "current" : ""}" data-id="${esc(it.id)}"><input type="checkbox" value="${esc(it.id)}"${state.checked.has(it.id) ? " checked" : ""}>` +
        `<span class="dot ${esc(it.state)}"></span><a href="${runsHref([it.id])}" title="${esc(it.name)}">${esc(it.name)}</a><span class="sub">${esc(step)}</span></li>`);
    }
  }
  el("benches").innerHTML = benches.join("") || '<li class="muted">none</li>';
  el("runs").innerHTML = runs.join("") || '<li class="muted">none</li>';
  el("compare").disabled = state.checked.size < 1;
}

// ---------- charts ----------
//
// uPlot (board/assets/uplot, vendored from npm: board/vendor/README.md)
// draws them. Each chart has its own read-out under it; the cursor is
// synced by step across the charts of a view, and so is the zoom (drag
// across a chart; double-click or "reset zoom" to undo). Log y, smoothing
// and, on a bench, one line per seed are set in the tool bar and kept in
// the address. CSV and PNG export each chart as drawn.

const charts = [];         // the charts on the page: {box, spec, u, main, csv(), png()}
window.board = { charts }; // for scripts (and the browser test)

// ema is TensorBoard's debiased exponential moving average with weight w.
function ema(y, w) {
  if (!w) return y;
  const out = new Array(y.length);
  let acc = 0, n = 0;
  for (let i = 0; i < y.length; i++) {
    const v = y[i];
    if (v === null || !Number.isFinite(v)) { out[i] = v; continue; }
    acc = acc * w + (1 - w) * v;
    n++;
    out[i] = acc / (1 - Math.pow(w, n));
  }
  return out;
}

// nearest is the index of s.x's point nearest x, or -1 when x is outside
// the series' steps (a run that stopped at step 19 has no value at 99).
function nearest(xs, x) {
  const n = xs.length;
  if (!n) return -1;
  const slack = n > 1 ? (xs[n - 1] - xs[0]) / (n - 1) / 2 : 0.5;
  if (x < xs[0] - slack || x > xs[n - 1] + slack) return -1;
  let lo = 0, hi = n - 1;
  while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (xs[mid] <= x) lo = mid; else hi = mid; }
  return Math.abs(xs[hi] - x) < Math.abs(xs[lo] - x) ? hi : lo;
}

function alpha(hex, a) { return hex + Math.round(a * 255).toString(16).padStart(2, "0"); }

function chartBox(parent, title, attrs) {
  const box = document.createElement("div");
  box.className = "chart";
  for (const [k, v] of Object.entries(attrs || {})) box.dataset[k] = v;
  box.innerHTML = `<div class="title"><span>${esc(title)}</span><span class="exports"><button type="button" data-export="csv" title="the points drawn, as CSV">CSV</button>` +
    `<button type="button" data-export="png" title="the chart as a PNG image">PNG</button></span></div><div class="plot"></div><div class="readout muted"></div>`;
  parent.appendChild(box);
  return box;
}

// dropCharts forgets the charts under parent (about to be redrawn).
function dropCharts(parent) {
  for (let i = charts.length - 1; i >= 0; i--) {
    if (parent.contains(charts[i].box)) { charts[i].u && charts[i].u.destroy(); charts.splice(i, 1); }
  }
}

// lineChart draws series [{label, color, dash, x, y, lo, hi}] into the
// chart box: lines, bands (lo..hi) where given. spec: {title, sync (the
// group the cursor and zoom are shared in), xlabel, logx, points}.
function lineChart(box, list, spec) {
  spec = Object.assign({ xlabel: "step" }, spec);
  const plot = box.querySelector(".plot");
  const o = state.chartOpts;
  const logy = o.log && !spec.logx;
  const smooth = spec.logx ? 0 : o.smooth;
  const pos = v => (v === null || v === undefined ? null : (logy && !(v > 0) ? null : v));
  const xs = [...new Set(list.flatMap(s => s.x))].sort((a, b) => a - b);
  if (!xs.length) { plot.innerHTML = '<p class="muted">no data</p>'; return null; }
  const at = new Map(xs.map((x, i) => [x, i]));
  const col = (s, ys) => { const out = new Array(xs.length).fill(null); s.x.forEach((x, i) => { out[at.get(x)] = pos(ys[i]); }); return out; };
  const data = [xs], series = [{ label: spec.xlabel }], bands = [], main = [];
  for (const s of list) {
    const drawn = { y: ema(s.y, smooth), lo: s.lo && ema(s.lo, smooth), hi: s.hi && ema(s.hi, smooth) };
    const m = { s, drawn, idx: series.length };
    data.push(col(s, drawn.y));
    series.push({ label: s.label, stroke: s.color, width: s.faint ? 1 : 1.6, dash: s.dash ? [5, 3] : undefined, spanGaps: true,
      points: { show: !!(spec.points || s.x.length <= 12), size: 5, fill: s.color } });
    if (s.lo && s.hi && s.x.length > 1) {
      data.push(col(s, drawn.hi), col(s, drawn.lo));
      series.push({ label: s.label + " hi", stroke: s.color, width: 0, spanGaps: true, points: { show: false } },
        { label: s.label + " lo", stroke: s.color, width: 0, spanGaps: true, points: { show: false } });
      bands.push({ series: [series.length - 2, series.length - 1], fill: alpha(s.color, 0.16) });
      m.band = true;
    }
    main.push(m);
  }
  const W = Math.max(320, plot.clientWidth || 480);
  const c = { box, spec, main, u: null, logy, smooth };
  const u = new uPlot({
    width: W, height: 230,
    padding: [8, 22, 0, 2], // room for the last x label
    legend: { show: false },
    cursor: { sync: { key: spec.sync, scales: ["x", null] }, drag: { x: true, y: false, setScale: false }, points: { size: 6 } },
    select: { show: true },
    scales: { x: spec.logx ? { time: false, distr: 3, log: 2 } : { time: false }, y: logy ? { distr: 3, log: 10 } : {} },
    axes: [
      { stroke: "#66707c", grid: { stroke: "#eceff3", width: 1 }, ticks: { stroke: "#d9dee4", width: 1 }, space: 70, font: "10px system-ui, sans-serif",
        values: (uu, ts) => ts.map(t => (t === null ? "" : fmt(t, 6))) },
      { stroke: "#66707c", grid: { stroke: "#eceff3", width: 1 }, ticks: { stroke: "#d9dee4", width: 1 }, size: 56, font: "10px system-ui, sans-serif",
        values: (uu, ts) => ts.map(t => (t === null ? "" : fmt(t, 4))) },
    ],
    series, bands,
    hooks: {
      setCursor: [() => readout(c)],
      setSelect: [uu => {
        if (uu.select.width < 3) return;
        const min = uu.posToVal(uu.select.left, "x"), max = uu.posToVal(uu.select.left + uu.select.width, "x");
        uu.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
        zoomTo(spec.sync, { min, max });
      }],
    },
  }, data, plot);
  c.u = u;
  u.over.addEventListener("dblclick", () => zoomTo(spec.sync, null));
  c.csv = () => chartCSV(c);
  c.png = () => chartPNG(c);
  box.querySelector(".exports").onclick = ev => {
    const what = ev.target.dataset && ev.target.dataset.export;
    if (!what) return;
    const name = (spec.title || "chart").replace(/[^A-Za-z0-9@._-]+/g, "_") + "." + what;
    if (what === "csv") {
      const url = URL.createObjectURL(new Blob([c.csv()], { type: "text/csv" }));
      download(name, url);
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } else download(name, c.png());
  };
  charts.push(c);
  const z = state.zoom[spec.sync];
  if (z && !spec.logx) u.setScale("x", z);
  readout(c);
  return c;
}

// zoomTo sets the x range of every chart of the group (null: all steps).
function zoomTo(group, range) {
  if (range) state.zoom[group] = range; else delete state.zoom[group];
  for (const c of charts) {
    if (c.spec.sync !== group || c.spec.logx) continue;
    const xs = c.u.data[0];
    c.u.setScale("x", range || { min: xs[0], max: xs[xs.length - 1] });
  }
  const b = document.querySelector(".toolbar .reset-zoom");
  if (b) b.disabled = !Object.keys(state.zoom).length;
}

// readout shows, under the chart, each series' value at the cursor's step:
// its nearest point, with its own step when that differs, or – when the
// series has no point near there.
function readout(c) {
  const u = c.u, box = c.box.querySelector(".readout");
  if (!u) return;
  const idx = u.cursor.idx;
  if (idx === null || idx === undefined || u.cursor.left < 0) {
    box.innerHTML = `<span class="hint">drag to zoom, double-click to reset${c.smooth ? ` · smoothed ${c.smooth}` : ""}${c.logy ? " · log y" : ""}</span>`;
    box.dataset.step = "";
    return;
  }
  const x = u.data[0][idx];
  const parts = [];
  for (const m of c.main) {
    const i = nearest(m.s.x, x);
    const v = i < 0 ? null : m.drawn.y[i];
    let t = "–";
    if (i >= 0) {
      t = esc(fmt(v));
      if (m.band) t += esc(` [${fmt(m.drawn.lo[i], 4)}, ${fmt(m.drawn.hi[i], 4)}]`);
      if (m.s.x[i] !== x) t += ` <span class="at">at ${esc(fmt(m.s.x[i]))}</span>`;
    }
    parts.push(`<span class="rv" data-label="${esc(m.s.label)}" data-value="${i < 0 ? "" : v}" data-step="${i < 0 ? "" : m.s.x[i]}">` +
      `<svg width="10" height="10"><rect width="10" height="10" fill="${esc(m.s.color)}"/></svg>${esc(m.s.label)} ${t}</span>`);
  }
  box.dataset.step = String(x);
  box.innerHTML = `<b>${esc(c.spec.xlabel)} ${esc(fmt(x))}</b> ` + parts.join("");
}

// chartCSV is the chart's points: the step, then per series its values
// as logged (empty where it has none at that step), its band, and the
// smoothed values when smoothing is on.
function chartCSV(c) {
  const q = s => /[",\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  const head = [c.spec.xlabel];
  for (const m of c.main) {
    head.push(m.s.label);
    if (m.s.lo) head.push(m.s.label + " lo", m.s.label + " hi");
    if (c.smooth) head.push(m.s.label + " smoothed");
  }
  const xs = c.u.data[0];
  const at = c.main.map(m => new Map(m.s.x.map((x, i) => [x, i])));
  const lines = [head.map(q).join(",")];
  const num = v => (v === null || v === undefined ? "" : String(v));
  for (const x of xs) {
    const row = [String(x)];
    c.main.forEach((m, j) => {
      const i = at[j].get(x);
      const has = i !== undefined;
      row.push(has ? num(m.s.y[i]) : "");
      if (m.s.lo) row.push(has ? num(m.s.lo[i]) : "", has ? num(m.s.hi[i]) : "");
      if (c.smooth) row.push(has ? num(m.drawn.y[i]) : "");
    });
    lines.push(row.join(","));
  }
  return lines.join("\n") + "\n";
}

// chartPNG is the chart with its title and legend on white, as a data URL.
function chartPNG(c) {
  const src = c.u.ctx.canvas, dpr = src.width / c.u.width;
  const head = Math.round(24 * dpr), rowH = Math.round(16 * dpr);
  const out = document.createElement("canvas");
  out.width = src.width;
  out.height = head + src.height + rowH * Math.ceil(c.main.length / 3) + Math.round(6 * dpr);
  const g = out.getContext("2d");
  g.fillStyle = "#fff";
  g.fillRect(0, 0, out.width, out.height);
  g.fillStyle = "#1d232b";
  g.font = `600 ${Math.round(13 * dpr)}px system-ui, sans-serif`;
  g.fillText((c.spec.title || "") + (c.smooth ? `  (smoothed ${c.smooth})` : "") + (c.logy ? "  (log y)" : ""), 6 * dpr, 16 * dpr);
  g.drawImage(src, 0, head);
  g.font = `${Math.round(11 * dpr)}px system-ui, sans-serif`;
  c.main.forEach((m, i) => {
    const x = (6 + (i % 3) * (c.u.width / 3)) * dpr, y = head + src.height + Math.floor(i / 3) * rowH + 12 * dpr;
    g.fillStyle = m.s.color;
    g.fillRect(x, y - 8 * dpr, 12 * dpr, 3 * dpr);
    g.fillStyle = "#1d232b";
    g.fillText(m.s.label, x + 16 * dpr, y - 3 * dpr);
  });
  return out.toDataURL("image/png");
}

function download(name, href) {
  const a = document.createElement("a");
  a.href = href;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  document.body.dataset.lastExport = name;
}

// toolbar is the chart options: log y, smoothing, per seed (a bench),
// reset zoom. onChange(refetch) after a change.
function toolbar(withSeeds, onChange) {
  const o = state.chartOpts;
  const box = document.createElement("div");
  box.className = "toolbar";
  box.innerHTML = `<label><input type="checkbox" class="opt-log"${o.log ? " checked" : ""}> log y</label>` +
    `<label>smoothing <input type="range" class="opt-smooth" min="0" max="0.99" step="0.01" value="${o.smooth}"> <span class="smooth-value">${o.smooth}</span></label>` +
    (withSeeds ? `<label><input type="checkbox" class="opt-seeds"${o.perSeed ? " checked" : ""}> per seed</label>` : "") +
    `<button type="button" class="reset-zoom"${Object.keys(state.zoom).length ? "" : " disabled"}>reset zoom</button>`;
  box.querySelector(".opt-log").onchange = ev => { o.log = ev.target.checked; writeHash(); onChange(false); };
  const sm = box.querySelector(".opt-smooth");
  sm.oninput = () => { box.querySelector(".smooth-value").textContent = sm.value; };
  sm.onchange = () => { o.smooth = Number(sm.value); writeHash(); onChange(false); };
  if (withSeeds) box.querySelector(".opt-seeds").onchange = ev => { o.perSeed = ev.target.checked; writeHash(); onChange(true); };
  box.querySelector(".reset-zoom").onclick = () => { for (const g of Object.keys(state.zoom)) zoomTo(g, null); };
  return box;
}

function legend(items) {
  return '<div class="legend">' + items.map(it =>
    `<span><svg width="14" height="8"><line x1="0" x2="14" y1="4" y2="4" stroke="${it.color}" stroke-width="2"${it.dash ? ` stroke-dasharray="3 2"` : ""}/></svg>${esc(it.label)}</span>`).join("") + "</div>";
}

// A metric picker: chips for the chosen metrics and an input with every
// name; onChange(metrics) when they change.
function picker(names, chosen, onChange) {
  const box = document.createElement("div");
  box.className = "picker";
  const listId = "names-" + Math.random().toString(36).slice(2);
  box.innerHTML = chosen.map(m => `<span class="chip">${esc(m)}<button type="button" data-rm="${esc(m)}" title="remove">×</button></span>`).join("") +
    `<input list="${listId}" placeholder="add a metric (${names.length})"><datalist id="${listId}">${names.map(n => `<option value="${esc(n)}">`).join("")}</datalist>`;
  box.addEventListener("click", ev => {
    const rm = ev.target.dataset && ev.target.dataset.rm;
    if (rm) onChange(chosen.filter(m => m !== rm));
  });
  const input = box.querySelector("input");
  const add = () => { const v = input.value.trim(); if (names.includes(v) && !chosen.includes(v)) onChange(chosen.concat([v])); };
  input.addEventListener("change", add);
  input.addEventListener("keydown", ev => { if (ev.key === "Enter") add(); });
  return box;
}

// writeHash puts the view's metrics and chart options in the address.
function writeHash() {
  const h = location.hash.split("?")[0], v = state.view, o = state.chartOpts;
  const q = [];
  if (v && v.metrics) q.push("m=" + v.metrics.map(encodeURIComponent).join(","));
  if (o.log) q.push("log=1");
  if (o.smooth) q.push("smooth=" + o.smooth);
  if (o.perSeed) q.push("seeds=1");
  history.replaceState(null, "", h + (q.length ? "?" + q.join("&") : ""));
}

// ---------- home ----------

function renderHome() {
  const l = state.list;
  if (!l) return;
  const benches = l.items.filter(i => i.kind === "bench"), runs = l.items.filter(i => i.kind === "run");
  let h = `<h1>Runs and benches</h1><p class="muted">Under ${l.dirs.map(d => `<code>${esc(d)}</code>`).join(", ")}: ${benches.length} bench(es), ${runs.length} run(s). ` +
    `Read-only; refreshed every 2 s.${l.locks ? "" : " Held locks cannot be seen on this system: a run counts as running while its metrics.jsonl is fresh."}</p>`;
  if (benches.length) {
    h += '<h2>Benches</h2><table class="list"><tr><th>bench</th><th>state</th><th class="num">done</th><th class="num">running</th><th class="num">failed</th><th class="num">pending</th><th class="num">arm-seeds</th></tr>';
    for (const b of benches) {
      const c = b.counts || {};
      h += `<tr data-id="${esc(b.id)}"><td><a href="${benchHref(b.id)}">${esc(b.name)}</a></td><td>${badge(b.state)}</td><td class="num">${c.done || 0}</td><td class="num">${c.running || 0}</td>` +
        `<td class="num">${c.failed || 0}</td><td class="num">${c.pending || 0}</td><td class="num">${b.cells || 0}</td></tr>`;
    }
    h += "</table>";
  }
  if (runs.length) {
    h += '<h2>Runs</h2><table class="list"><tr><th>run</th><th>state</th><th class="num">step</th><th class="num">steps</th><th class="num">ETA</th><th>updated</th></tr>';
    for (const r of runs) {
      h += `<tr data-id="${esc(r.id)}"><td><a href="${runsHref([r.id])}">${esc(r.name)}</a></td><td>${badge(r.state)}</td><td class="num">${r.step !== undefined ? esc(fmt(r.step)) : ""}</td>` +
        `<td class="num">${r.total || ""}</td><td class="num">${esc(fmtDur(r.eta_s))}</td><td class="muted">${esc(r.updated || "")}</td></tr>`;
    }
    h += "</table>";
  }
  if (!l.items.length) h += '<p class="muted">Nothing found yet: runs are directories with a metrics.jsonl, benches directories with runs/ARM/seed-N.</p>';
  el("main").innerHTML = h;
  document.body.dataset.ready = "home";
}

// ---------- runs (one or several overlaid) ----------

async function refreshRuns() {
  const ids = state.route.ids;
  let v = state.view;
  if (!v) {
    v = state.view = { kind: "runs", runs: {}, versions: {}, data: {}, metrics: state.route.metrics, built: false };
  }
  const infos = await Promise.all(ids.map(id => api("run", { id }).catch(e => ({ id, error: e.message }))));
  if (state.view !== v) return;
  const names = new Set();
  let changed = false;
  for (const info of infos) {
    v.runs[info.id] = info;
    (info.metrics || []).forEach(n => names.add(n));
  }
  v.names = [...names].sort();
  if (!v.metrics) v.metrics = pickDefaults(v.names, DEFAULT_RUN_METRICS);
  for (const info of infos) {
    if (info.error) continue;
    const key = info.version + "|" + v.metrics.join(",");
    if (v.versions[info.id] !== key) {
      const s = await api("series", { id: info.id, m: v.metrics });
      if (state.view !== v) return;
      v.data[info.id] = s.series;
      v.versions[info.id] = key;
      changed = true;
    }
  }
  if (changed || !v.built) renderRuns(v);
  else renderRunsHeader(v);
}

function runName(v, id) {
  const info = v.runs[id];
  return info && info.name ? info.name : id;
}

// runLabel is a run's name less what every run overlaid shares.
function runLabel(v, id) {
  const ids = state.route.ids;
  return shortLabels(ids.map(i => runName(v, i)))[ids.indexOf(id)] || runName(v, id);
}

function sharedPrefix(v) {
  const ids = state.route.ids;
  if (ids.length < 2) return "";
  const full = runName(v, ids[0]), short = runLabel(v, ids[0]);
  return full.slice(0, full.length - short.length).replace(/\/$/, "");
}

function renderRunsHeader(v) {
  const ids = state.route.ids;
  const rows = ids.map((id, i) => {
    const r = v.runs[id] || {};
    if (r.error) return `<tr><td colspan="6" class="err">${esc(id)}: ${esc(r.error)}</td></tr>`;
    return `<tr data-run="${esc(id)}" data-state="${esc(r.state)}" data-step="${r.step !== undefined ? r.step : ""}">` +
      `<td title="${esc(runName(v, id))}"><svg width="14" height="8"><line x1="0" x2="14" y1="4" y2="4" stroke="${color(i)}" stroke-width="2"/></svg> ${esc(runLabel(v, id))}</td>` +
      `<td>${badge(r.state || "?")}</td><td class="num step">${r.step !== undefined ? esc(fmt(r.step)) : "–"}</td><td class="num">${r.total || ""}</td>` +
      `<td class="num">${esc(fmtDur(r.eta_s))}</td><td class="num">${r.rows || 0}</td><td class="num corrupt">${r.corrupt ? esc(r.corrupt) : ""}</td></tr>`;
  }).join("");
  let notes = "";
  ids.forEach(id => {
    const r = v.runs[id] || {};
    if (r.state === "failed") notes += failureHTML(runLabel(v, id), r.failure, `data-run="${esc(id)}"`);
    if (r.corrupt) {
      notes += `<p class="warn corrupt-note" data-run="${esc(id)}">${esc(runLabel(v, id))}: ${r.corrupt} line${r.corrupt === 1 ? "" : "s"} of metrics.jsonl skipped, not metrics rows ` +
        `(line${r.corrupt_lines.length === 1 ? "" : "s"} ${esc(r.corrupt_lines.join(", "))}${r.corrupt > r.corrupt_lines.length ? ", …" : ""})</p>`;
    }
  });
  el("runs-head").innerHTML = `<table><tr><th>run</th><th>state</th><th class="num">step</th><th class="num">steps</th><th class="num">ETA</th><th class="num">rows</th>` +
    `<th class="num">corrupt lines</th></tr>${rows}</table>${notes}`;
}

// failureHTML says why a run failed and how to resume it.
function failureHTML(label, f, attrs) {
  f = f || {};
  const why = f.reason ? esc(f.reason) : '<span class="muted">no exit reason recorded (the process was killed, or the bench that ran it was)</span>';
  return `<div class="failure" ${attrs}><b>${esc(label)}</b> failed${f.at ? ` at ${esc(f.at)}` : ""}${f.released ? " (its lock was released)" : ""}: ` +
    `<span class="reason">${why}</span>${f.resume ? `<div>resume: <code class="resume">${esc(f.resume)}</code></div>` : ""}</div>`;
}

function renderRuns(v) {
  const ids = state.route.ids;
  const main = el("main");
  if (!v.built) {
    const prefix = sharedPrefix(v);
    main.innerHTML = `<h1>${ids.length > 1 ? ids.length + " runs overlaid" + (prefix ? " <span class=\"muted\">in " + esc(prefix) + "</span>" : "") : esc(runName(v, ids[0]))}</h1><div id="runs-head"></div>` +
      `<h2>Curves</h2><div id="runs-picker"></div><div id="runs-tools"></div><div class="charts" id="runs-charts"></div><h2>Last values</h2><div class="scroll" id="runs-last"></div>`;
    v.built = true;
  }
  renderRunsHeader(v);
  const pk = el("runs-picker");
  pk.innerHTML = "";
  pk.appendChild(picker(v.names, v.metrics, ms => { v.metrics = ms; v.versions = {}; writeHash(); refresh(); }));
  const tools = el("runs-tools");
  tools.innerHTML = "";
  tools.appendChild(toolbar(false, () => renderRunCharts(v)));
  renderRunCharts(v);
  let last = '<table class="last"><tr><th>metric</th><th>run</th><th class="num">step</th><th class="num">value</th><th class="num">logged</th></tr>';
  for (const m of v.metrics) {
    ids.forEach(id => {
      const s = v.data[id] && v.data[id][m];
      if (s) {
        last += `<tr data-run="${esc(id)}" data-metric="${esc(m)}"><td>${esc(m)}</td><td>${esc(runLabel(v, id))}</td><td class="num last-step" data-value="${s.last_x}">${esc(fmt(s.last_x))}</td>` +
          `<td class="num last-value" data-value="${s.last_y}">${esc(fmt(s.last_y))}</td><td class="num">${s.n}</td></tr>`;
      }
    });
  }
  el("runs-last").innerHTML = last + "</table>";
  document.body.dataset.ready = "runs " + ids.join(",") + " " + Object.values(v.versions).join(";");
}

function renderRunCharts(v) {
  const ids = state.route.ids;
  const box = el("runs-charts");
  dropCharts(box);
  box.innerHTML = "";
  for (const m of v.metrics) {
    const c = chartBox(box, m, { metric: m });
    const list = [], leg = [];
    ids.forEach((id, i) => {
      const s = v.data[id] && v.data[id][m];
      const label = runLabel(v, id);
      if (s) list.push({ label, color: color(i), dash: dash(i), x: s.x, y: s.y });
      leg.push({ label, color: color(i), dash: dash(i) });
    });
    lineChart(c, list, { title: m, sync: "runs" });
    if (ids.length > 1) c.insertAdjacentHTML("beforeend", legend(leg));
  }
}

// ---------- a bench ----------

async function refreshBench() {
  const id = state.route.ids[0];
  let v = state.view;
  if (!v) v = state.view = { kind: "bench", version: null, metrics: state.route.metrics, series: null, seriesKey: null, built: false };
  const b = await api("bench", { id });
  if (state.view !== v) return;
  const first = !v.bench;
  v.bench = b;
  if (!v.metrics) v.metrics = pickDefaults(b.metrics || [], DEFAULT_BENCH_METRICS);
  const perSeed = state.chartOpts.perSeed;
  const key = b.version + "|" + v.metrics.join(",") + "|" + perSeed;
  let seriesChanged = false;
  if (v.seriesKey !== key) {
    const s = await api("bench/series", perSeed ? { id, m: v.metrics, seeds: "1" } : { id, m: v.metrics });
    if (state.view !== v) return;
    v.series = s.series;
    v.seeds = s.seeds || null;
    v.seriesKey = key;
    seriesChanged = true;
  }
  if (first || b.version !== v.version || seriesChanged) {
    v.version = b.version;
    renderBench(v, seriesChanged || first);
  }
}

function armColor(b, arm) {
  if (arm === "base") return "#222";
  const arms = b.arms.filter(a => a !== "base");
  return color(arms.indexOf(arm));
}
function armDash(b, arm) {
  const arms = b.arms.filter(a => a !== "base");
  return dash(arms.indexOf(arm));
}

function shorten(t, n) { t = String(t); return t.length > n ? t.slice(0, n - 1) + "…" : t; }

function cellHTML(c) {
  let body = `<div class="st">${esc(c.state)}</div>`;
  if (c.state === "running") {
    body += c.total ? `<progress max="${c.total}" value="${c.step || 0}"></progress>` : "";
    body += `<div><span class="step">${c.step !== undefined ? esc(fmt(c.step)) : "–"}</span>${c.total ? "/" + c.total : ""}${c.eta_s !== undefined ? " · ETA " + esc(fmtDur(c.eta_s)) : ""}</div>`;
  } else if (c.state === "failed") {
    body += `<div>at <span class="step">${c.step !== undefined ? esc(fmt(c.step)) : "–"}</span>${c.total ? "/" + c.total : ""}</div>`;
    const why = c.failure && c.failure.reason;
    body += `<div class="why" title="${esc(why || "no exit reason recorded")}">${esc(why ? shorten(why, 40) : "no reason recorded")}</div>`;
  } else if (c.state === "done" && c.total) {
    body += `<div><span class="step">${c.step !== undefined ? esc(fmt(c.step)) : ""}</span>/${c.total}</div>`;
  }
  if (c.corrupt) body += `<div class="warn corrupt" data-corrupt="${c.corrupt}">${c.corrupt} corrupt line${c.corrupt === 1 ? "" : "s"}</div>`;
  return `<td class="cell ${esc(c.state)}" data-arm="${esc(c.arm)}" data-seed="${c.seed}" data-state="${esc(c.state)}" data-step="${c.step !== undefined ? c.step : ""}" data-total="${c.total || ""}">` +
    (c.version ? `<a class="box" href="${runsHref([c.id])}" title="${esc(c.arm)} seed ${c.seed}: open the run">${body}</a>` : `<div class="box">${body}</div>`) + "</td>";
}

function renderGrid(b) {
  const byKey = {};
  for (const c of b.cells) byKey[c.arm + "\u0000" + c.seed] = c;
  let h = '<table class="grid" id="grid"><tr><th>arm</th>' + b.seeds.map(s => `<th>seed ${s}</th>`).join("") + "</tr>";
  for (const arm of b.arms) {
    const ids = b.cells.filter(c => c.arm === arm && c.version).map(c => c.id);
    const overlay = ids.length > 1 ? `<a href="${runsHref(ids)}" title="overlay this arm's seeds">overlay</a>` : "";
    h += `<tr data-arm="${esc(arm)}"><th class="arm"><svg width="14" height="8"><line x1="0" x2="14" y1="4" y2="4" stroke="${armColor(b, arm)}" stroke-width="2"/></svg> ${esc(arm)}${overlay}</th>`;
    for (const s of b.seeds) {
      const c = byKey[arm + "\u0000" + s];
      h += c ? cellHTML(c) : "<td></td>";
    }
    h += "</tr>";
  }
  return h + "</table>";
}

function renderResults(b) {
  const r = b.results;
  if (!r) return '<p class="muted">No results.csv yet: the bench writes it when its runs end.</p>';
  const cols = [];
  for (let i = 2; i < r.header.length; i++) {
    const h = r.header[i];
    if (h.endsWith("_mean") && r.header[i + 1] === h.slice(0, -5) + "_std") { cols.push({ name: h.slice(0, -5), mean: i, std: i + 1 }); i++; }
    else cols.push({ name: h, mean: i, std: -1 });
  }
  let h = `<table class="results" id="results"><tr><th>${esc(r.header[0])}</th><th class="num">${esc(r.header[1])}</th>` + cols.map(c => `<th class="num">${esc(c.name)}</th>`).join("") + "</tr>";
  for (const row of r.rows) {
    h += `<tr data-arm="${esc(row[0])}"><td>${esc(row[0])}</td><td class="num seeds">${esc(row[1])}</td>`;
    for (const c of cols) {
      const mean = row[c.mean] || "", std = c.std >= 0 ? row[c.std] || "" : "";
      h += `<td class="num" data-col="${esc(c.name)}" data-mean="${esc(mean)}" data-std="${esc(std)}">` +
        (mean === "" ? "–" : `<span class="mean">${esc(mean)}</span>${std !== "" ? `<span class="pm">± <span class="std">${esc(std)}</span></span>` : ""}`) + "</td>";
    }
    h += "</tr>";
  }
  h += "</table>";
  return h;
}

function verdictClass(s) { return "v-" + String(s || "").replace(/\s+/g, "-"); }

function renderVerdicts(b) {
  const vv = b.verdicts;
  if (!vv) return `<p class="muted">${esc(b.verdicts_note || "No verdicts.")}</p>`;
  let h = `<table class="verdicts" id="verdicts"><tr><th>claim <span class="sub">metric</span></th><th>better <span class="sub">than</span></th><th class="num">seeds</th><th class="num">d</th>` +
    `<th class="num">95% interval</th><th class="num">p</th><th>verdict</th><th class="num">Holm p</th><th>after Holm</th></tr>`;
  for (const r of vv.rows) {
    const ci = r.ci_low !== null && r.ci_low !== undefined ? `[${fmt(r.ci_low, 4)}, ${fmt(r.ci_high, 4)}]` : "–";
    h += `<tr data-claim="${esc(r.claim)}"><td>${esc(r.claim)}<div class="sub">${esc(r.metric)}</div></td><td>${esc(r.arms[0])}<div class="sub">than ${esc(r.arms[1])}</div></td>` +
      `<td class="num seeds">${(r.seeds || []).length}</td><td class="num v-d" data-value="${r.delta_mean === null || r.delta_mean === undefined ? "" : r.delta_mean}">${esc(fmt(r.delta_mean, 4))}</td>` +
      `<td class="num">${esc(ci)}</td><td class="num">${esc(fmt(r.p, 3))}</td><td class="v-verdict ${verdictClass(r.verdict)}">${esc(r.verdict)}</td>` +
      `<td class="num">${esc(fmt(r.p_holm, 3))}</td><td class="v-holm ${verdictClass(r.verdict_holm)}">${esc(r.verdict_holm)}</td></tr>`;
  }
  h += "</table>";
  if (vv.note) h += `<p class="note">${esc(vv.note)}</p>`;
  return h;
}

function renderPassK(b) {
  const box = el("bench-passk");
  dropCharts(box);
  box.innerHTML = "";
  el("passk-legend").innerHTML = "";
  if (!b.passk || !b.passk.length) { box.innerHTML = '<p class="muted">No pass@k yet: it is read from the finished arm-seeds\' last evaluation.</p>'; return; }
  const leg = b.passk.map(a => ({ label: `${a.arm} (${a.seeds} seed${a.seeds === 1 ? "" : "s"})`, color: armColor(b, a.arm), dash: armDash(b, a.arm) }));
  el("passk-legend").innerHTML = legend(leg);
  for (const set of b.pass_sets) {
    const c = chartBox(box, `val/${set}/pass@k`, { set });
    const list = [];
    for (const a of b.passk) {
      const pc = a.sets[set];
      if (!pc) continue;
      list.push({ label: a.arm, color: armColor(b, a.arm), dash: armDash(b, a.arm), x: pc.k, y: pc.mean, lo: pc.lo, hi: pc.hi });
    }
    lineChart(c, list, { title: `val/${set}/pass@k`, logx: true, points: true, xlabel: "k", sync: "passk" });
  }
}

function renderBenchCharts(v) {
  const b = v.bench;
  const pk = el("bench-picker");
  pk.innerHTML = "";
  pk.appendChild(picker(b.metrics || [], v.metrics, ms => { v.metrics = ms; v.seriesKey = null; writeHash(); refresh(); }));
  const tools = el("bench-tools");
  tools.innerHTML = "";
  tools.appendChild(toolbar(true, refetch => { if (refetch) { v.seriesKey = null; refresh(); } else renderBenchCurves(v); }));
  renderBenchCurves(v);
}

// renderBenchCurves draws per arm the mean over seeds with its band, or
// with "per seed" one line per arm-seed (failed ones dashed).
function renderBenchCurves(v) {
  const b = v.bench;
  const charts = el("bench-charts");
  dropCharts(charts);
  charts.innerHTML = "";
  const armsWith = new Set();
  const perSeed = state.chartOpts.perSeed && v.seeds;
  el("curves-what").textContent = perSeed ? "one line per arm-seed, failed ones dashed" : "per arm: the mean over the seeds not failed, band: lowest to highest";
  for (const m of v.metrics) {
    const box = chartBox(charts, m, { metric: m });
    const list = [];
    if (perSeed) {
      for (const s of v.seeds[m] || []) {
        armsWith.add(s.arm);
        list.push({ label: `${s.arm} seed ${s.seed}${s.state === "failed" ? " (failed)" : ""}`, color: armColor(b, s.arm), dash: s.state === "failed", faint: true, x: s.x, y: s.y });
      }
    } else {
      for (const band of (v.series && v.series[m]) || []) {
        armsWith.add(band.arm);
        list.push({ label: band.arm, color: armColor(b, band.arm), dash: armDash(b, band.arm), x: band.x, y: band.mean, lo: band.lo, hi: band.hi });
      }
    }
    lineChart(box, list, { title: m, sync: "bench" });
  }
  el("bench-legend").innerHTML = legend(b.arms.filter(a => armsWith.has(a)).map(a => ({ label: a, color: armColor(b, a), dash: armDash(b, a) })));
}

// renderFailures lists the failed arm-seeds with why and how to resume.
function renderFailures(b) {
  const failed = b.cells.filter(c => c.state === "failed");
  if (!failed.length) return "";
  return '<div id="failures">' + failed.map(c => failureHTML(`${c.arm} seed ${c.seed}`, c.failure, `data-arm="${esc(c.arm)}" data-seed="${c.seed}"`)).join("") + "</div>";
}

function renderBench(v, chartsToo) {
  const b = v.bench;
  const main = el("main");
  if (!v.built) {
    main.innerHTML = `<div id="bench-head"></div><h2>Arm-seeds</h2><div class="scroll" id="bench-grid"></div>` +
      `<h2>Curves <span class="muted" id="curves-what"></span></h2><div id="bench-picker"></div><div id="bench-tools"></div><div id="bench-legend"></div><div class="charts" id="bench-charts"></div>` +
      `<h2 id="results-h">Results <span id="results-badge"></span></h2><div id="results-note" class="note"></div><div class="scroll" id="bench-results"></div>` +
      `<h2 id="verdicts-h">Claims <span id="verdicts-badge"></span></h2><div class="scroll" id="bench-verdicts"></div>` +
      `<h2>pass@k <span class="muted">at the final evaluation, mean over the finished seeds, band: lowest to highest</span></h2><div id="passk-legend"></div><div class="charts" id="bench-passk"></div>`;
    v.built = true;
    chartsToo = true;
  }
  const c = b.counts || {};
  el("bench-head").innerHTML = `<h1>${esc(b.name)} ${badge(b.state)}</h1><p class="muted">${c.done || 0} done, ${c.running || 0} running, ${c.failed || 0} failed, ` +
    `${c.pending || 0} pending of ${b.cells.length} arm-seeds. Grid from ${esc(b.spec)}.</p>${b.spec_note ? `<p class="note">${esc(b.spec_note)}</p>` : ""}`;
  el("bench-grid").innerHTML = renderGrid(b) + renderFailures(b);
  const r = b.results;
  el("results-badge").innerHTML = r ? badge(r.provisional ? "provisional" : "final") : "";
  el("results-note").textContent = r ? `results.csv, written ${r.updated}${r.note ? ": " + r.note : ""}` : "";
  el("bench-results").innerHTML = renderResults(b);
  const vv = b.verdicts;
  el("verdicts-badge").innerHTML = vv ? badge(vv.provisional ? "provisional" : "final") + ` <span class="muted">${esc(vv.source === "live" ? "judged live" : vv.source)}</span>` : "";
  el("bench-verdicts").innerHTML = renderVerdicts(b);
  if (chartsToo) renderBenchCharts(v);
  renderPassK(b);
  document.body.dataset.ready = "bench " + b.id + " " + b.version;
}

// ---------- the loop ----------

let refreshing = false, again = false;

async function refresh() {
  if (refreshing) { again = true; return; }
  refreshing = true;
  try {
    state.list = await api("list");
    renderSide();
    const r = state.route;
    if (r.view === "home") renderHome();
    else if (r.view === "runs") await refreshRuns();
    else if (r.view === "bench") await refreshBench();
    state.failures = 0;
    el("live").className = "";
    el("live").textContent = "live";
    el("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    state.failures++;
    el("live").className = "stale";
    el("live").textContent = "not updating: " + e.message;
    if (state.view === null) el("main").innerHTML = `<p class="err">${esc(e.message)}</p>`;
  } finally {
    refreshing = false;
    if (again) { again = false; setTimeout(refresh, 0); }
  }
}

function start() {
  el("filter").addEventListener("input", renderSide);
  el("runs").addEventListener("change", ev => {
    if (ev.target.type !== "checkbox") return;
    if (ev.target.checked) state.checked.add(ev.target.value); else state.checked.delete(ev.target.value);
    el("compare").disabled = state.checked.size < 1;
  });
  el("compare").addEventListener("click", () => { location.hash = runsHref([...state.checked]); });
  window.addEventListener("hashchange", routeChanged);
  let width = window.innerWidth;
  window.addEventListener("resize", () => {
    if (Math.abs(window.innerWidth - width) < 40) return;
    width = window.innerWidth;
    if (state.view) { state.view.versions = {}; state.view.seriesKey = null; state.view.version = null; refresh(); }
  });
  routeChanged();
  setInterval(refresh, POLL_MS);
}

start();
