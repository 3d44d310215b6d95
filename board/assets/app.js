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

function niceTicks(lo, hi, n) {
  if (!(hi > lo)) return [lo];
  const span = hi - lo, raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map(m => m * mag).find(s => span / s <= n) || 10 * mag;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

// lineChart draws series [{label, color, dash, x, y, lo, hi}] into box as
// an SVG: lines, bands (lo..hi) where given, axes with ticks, a hover
// read-out. opts: {logx, points, xlabel}.
function lineChart(box, list, opts) {
  opts = opts || {};
  const W = Math.max(320, box.clientWidth || 480), H = 230;
  const m = { l: 54, r: 12, t: 8, b: 30 };
  const fx = opts.logx ? (x => Math.log2(x)) : (x => x);
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const s of list) {
    for (let i = 0; i < s.x.length; i++) {
      const x = fx(s.x[i]);
      x0 = Math.min(x0, x); x1 = Math.max(x1, x);
      const lo = s.lo ? s.lo[i] : s.y[i], hi = s.hi ? s.hi[i] : s.y[i];
      y0 = Math.min(y0, lo, s.y[i]); y1 = Math.max(y1, hi, s.y[i]);
    }
  }
  if (!Number.isFinite(x0)) { box.innerHTML = '<p class="muted">no data</p>'; return; }
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  if (y1 === y0) { const d = Math.abs(y0) * 0.1 || 1; y0 -= d; y1 += d; }
  const pad = (y1 - y0) * 0.05; y0 -= pad; y1 += pad;
  const X = x => m.l + (fx(x) - x0) / (x1 - x0) * (W - m.l - m.r);
  const Y = y => m.t + (1 - (y - y0) / (y1 - y0)) * (H - m.t - m.b);
  const parts = [];
  const yt = niceTicks(y0, y1, 5);
  parts.push('<g class="grid">');
  for (const t of yt) parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${Y(t).toFixed(1)}" y2="${Y(t).toFixed(1)}"/>`);
  parts.push("</g>");
  for (const t of yt) parts.push(`<text x="${m.l - 5}" y="${(Y(t) + 3).toFixed(1)}" text-anchor="end">${esc(fmt(t, 4))}</text>`);
  let xt;
  if (opts.logx) {
    xt = [...new Set(list.flatMap(s => s.x))].sort((a, b) => a - b);
    if (xt.length > 10) xt = xt.filter((_, i) => i % Math.ceil(xt.length / 10) === 0);
    xt = xt.map(k => ({ v: k, at: X(k) }));
  } else {
    xt = niceTicks(x0, x1, Math.max(3, Math.floor(W / 90))).map(v => ({ v, at: X(v) }));
  }
  for (const t of xt) parts.push(`<text x="${t.at.toFixed(1)}" y="${H - m.b + 14}" text-anchor="middle">${esc(fmt(t.v, 6))}</text>`);
  parts.push(`<line class="axis" x1="${m.l}" x2="${W - m.r}" y1="${H - m.b}" y2="${H - m.b}"/><line class="axis" x1="${m.l}" x2="${m.l}" y1="${m.t}" y2="${H - m.b}"/>`);
  if (opts.xlabel) parts.push(`<text x="${W - m.r}" y="${H - 3}" text-anchor="end">${esc(opts.xlabel)}</text>`);
  for (const s of list) {
    if (s.lo && s.hi && s.x.length > 1) {
      let d = "";
      for (let i = 0; i < s.x.length; i++) d += (i ? "L" : "M") + X(s.x[i]).toFixed(1) + " " + Y(s.hi[i]).toFixed(1);
      for (let i = s.x.length - 1; i >= 0; i--) d += "L" + X(s.x[i]).toFixed(1) + " " + Y(s.lo[i]).toFixed(1);
      parts.push(`<path d="${d}Z" fill="${s.color}" fill-opacity="0.16" stroke="none"/>`);
    }
  }
  for (const s of list) {
    let d = "";
    for (let i = 0; i < s.x.length; i++) d += (i ? "L" : "M") + X(s.x[i]).toFixed(1) + " " + Y(s.y[i]).toFixed(1);
    parts.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.6"${s.dash ? ` stroke-dasharray="${s.dash}"` : ""}/>`);
    if (opts.points || s.x.length <= 12) {
      for (let i = 0; i < s.x.length; i++) parts.push(`<circle cx="${X(s.x[i]).toFixed(1)}" cy="${Y(s.y[i]).toFixed(1)}" r="2.5" fill="${s.color}"/>`);
    }
  }
  parts.push(`<line class="hover" x1="0" x2="0" y1="${m.t}" y2="${H - m.b}" visibility="hidden"/>`);
  parts.push(`<rect class="overlay" x="${m.l}" y="${m.t}" width="${W - m.l - m.r}" height="${H - m.t - m.b}" fill="transparent"/>`);
  box.innerHTML = `<svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}">${parts.join("")}</svg>`;
  const svg = box.querySelector("svg"), hover = svg.querySelector(".hover"), tip = el("tip");
  svg.querySelector(".overlay").addEventListener("mousemove", ev => {
    const r = svg.getBoundingClientRect();
    const px = (ev.clientX - r.left) * W / r.width;
    const xv = x0 + (px - m.l) / (W - m.l - m.r) * (x1 - x0);
    const rows = [];
    let at = null;
    for (const s of list) {
      let best = -1, bd = Infinity;
      for (let i = 0; i < s.x.length; i++) { const dd = Math.abs(fx(s.x[i]) - xv); if (dd < bd) { bd = dd; best = i; } }
      if (best < 0) continue;
      at = s.x[best];
      const band = s.lo ? ` [${fmt(s.lo[best], 4)}, ${fmt(s.hi[best], 4)}]` : "";
      rows.push(`<div><svg width="10" height="10"><rect width="10" height="10" fill="${s.color}"/></svg>${esc(s.label)}: ${esc(fmt(s.y[best]))}${band}</div>`);
    }
    if (at === null) return;
    hover.setAttribute("x1", X(at)); hover.setAttribute("x2", X(at)); hover.setAttribute("visibility", "visible");
    tip.innerHTML = `<div>${esc(opts.xlabel || "step")} ${esc(fmt(at))}</div>` + rows.join("");
    tip.hidden = false;
    tip.style.left = (ev.clientX + 14) + "px";
    tip.style.top = (ev.clientY + 10) + "px";
  });
  svg.querySelector(".overlay").addEventListener("mouseleave", () => { hover.setAttribute("visibility", "hidden"); tip.hidden = true; });
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

function setMetricsInHash(metrics) {
  const h = location.hash.split("?")[0];
  history.replaceState(null, "", h + "?m=" + metrics.map(encodeURIComponent).join(","));
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
      `<td class="num">${esc(fmtDur(r.eta_s))}</td><td class="num">${r.rows || 0}</td></tr>`;
  }).join("");
  el("runs-head").innerHTML = `<table><tr><th>run</th><th>state</th><th class="num">step</th><th class="num">steps</th><th class="num">ETA</th><th class="num">rows</th></tr>${rows}</table>`;
}

function renderRuns(v) {
  const ids = state.route.ids;
  const main = el("main");
  if (!v.built) {
    const prefix = sharedPrefix(v);
    main.innerHTML = `<h1>${ids.length > 1 ? ids.length + " runs overlaid" + (prefix ? " <span class=\"muted\">in " + esc(prefix) + "</span>" : "") : esc(runName(v, ids[0]))}</h1><div id="runs-head"></div>` +
      `<h2>Curves</h2><div id="runs-picker"></div><div class="charts" id="runs-charts"></div><h2>Last values</h2><div class="scroll" id="runs-last"></div>`;
    v.built = true;
  }
  renderRunsHeader(v);
  const pk = el("runs-picker");
  pk.innerHTML = "";
  pk.appendChild(picker(v.names, v.metrics, ms => { v.metrics = ms; v.versions = {}; setMetricsInHash(ms); refresh(); }));
  const charts = el("runs-charts");
  charts.innerHTML = "";
  let last = '<table class="last"><tr><th>metric</th><th>run</th><th class="num">step</th><th class="num">value</th><th class="num">logged</th></tr>';
  for (const m of v.metrics) {
    const box = document.createElement("div");
    box.className = "chart";
    box.dataset.metric = m;
    box.innerHTML = `<div class="title">${esc(m)}</div><div class="plot"></div>`;
    charts.appendChild(box);
    const list = [], leg = [];
    ids.forEach((id, i) => {
      const s = v.data[id] && v.data[id][m];
      const label = runLabel(v, id);
      if (s) {
        list.push({ label, color: color(i), dash: dash(i), x: s.x, y: s.y });
        last += `<tr data-run="${esc(id)}" data-metric="${esc(m)}"><td>${esc(m)}</td><td>${esc(label)}</td><td class="num last-step" data-value="${s.last_x}">${esc(fmt(s.last_x))}</td>` +
          `<td class="num last-value" data-value="${s.last_y}">${esc(fmt(s.last_y))}</td><td class="num">${s.n}</td></tr>`;
      }
      leg.push({ label, color: color(i), dash: dash(i) });
    });
    lineChart(box.querySelector(".plot"), list, { xlabel: "step" });
    if (ids.length > 1) box.insertAdjacentHTML("beforeend", legend(leg));
  }
  el("runs-last").innerHTML = last + "</table>";
  document.body.dataset.ready = "runs " + ids.join(",") + " " + Object.values(v.versions).join(";");
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
  const key = b.version + "|" + v.metrics.join(",");
  let seriesChanged = false;
  if (v.seriesKey !== key) {
    const s = await api("bench/series", { id, m: v.metrics });
    if (state.view !== v) return;
    v.series = s.series;
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

function cellHTML(c) {
  let body = `<div class="st">${esc(c.state)}</div>`;
  if (c.state === "running") {
    body += c.total ? `<progress max="${c.total}" value="${c.step || 0}"></progress>` : "";
    body += `<div><span class="step">${c.step !== undefined ? esc(fmt(c.step)) : "–"}</span>${c.total ? "/" + c.total : ""}${c.eta_s !== undefined ? " · ETA " + esc(fmtDur(c.eta_s)) : ""}</div>`;
  } else if (c.state === "failed") {
    body += `<div>at <span class="step">${c.step !== undefined ? esc(fmt(c.step)) : "–"}</span>${c.total ? "/" + c.total : ""}</div>`;
  } else if (c.state === "done" && c.total) {
    body += `<div><span class="step">${c.step !== undefined ? esc(fmt(c.step)) : ""}</span>/${c.total}</div>`;
  }
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
  box.innerHTML = "";
  el("passk-legend").innerHTML = "";
  if (!b.passk || !b.passk.length) { box.innerHTML = '<p class="muted">No pass@k yet: it is read from the finished arm-seeds\' last evaluation.</p>'; return; }
  const leg = b.passk.map(a => ({ label: `${a.arm} (${a.seeds} seed${a.seeds === 1 ? "" : "s"})`, color: armColor(b, a.arm), dash: armDash(b, a.arm) }));
  el("passk-legend").innerHTML = legend(leg);
  for (const set of b.pass_sets) {
    const c = document.createElement("div");
    c.className = "chart";
    c.dataset.set = set;
    c.innerHTML = `<div class="title">val/${esc(set)}/pass@k</div><div class="plot"></div>`;
    box.appendChild(c);
    const list = [];
    for (const a of b.passk) {
      const pc = a.sets[set];
      if (!pc) continue;
      list.push({ label: a.arm, color: armColor(b, a.arm), dash: armDash(b, a.arm), x: pc.k, y: pc.mean, lo: pc.lo, hi: pc.hi });
    }
    lineChart(c.querySelector(".plot"), list, { logx: true, points: true, xlabel: "k" });
  }
}

function renderBenchCharts(v) {
  const b = v.bench;
  const pk = el("bench-picker");
  pk.innerHTML = "";
  pk.appendChild(picker(b.metrics || [], v.metrics, ms => { v.metrics = ms; v.seriesKey = null; setMetricsInHash(ms); refresh(); }));
  const charts = el("bench-charts");
  charts.innerHTML = "";
  const armsWith = new Set();
  for (const m of v.metrics) {
    const box = document.createElement("div");
    box.className = "chart";
    box.dataset.metric = m;
    box.innerHTML = `<div class="title">${esc(m)}</div><div class="plot"></div>`;
    charts.appendChild(box);
    const list = [];
    for (const band of (v.series && v.series[m]) || []) {
      armsWith.add(band.arm);
      list.push({ label: band.arm, color: armColor(b, band.arm), dash: armDash(b, band.arm), x: band.x, y: band.mean, lo: band.lo, hi: band.hi });
    }
    lineChart(box.querySelector(".plot"), list, { xlabel: "step" });
  }
  el("bench-legend").innerHTML = legend(b.arms.filter(a => armsWith.has(a)).map(a => ({ label: a, color: armColor(b, a), dash: armDash(b, a) })));
}

function renderBench(v, chartsToo) {
  const b = v.bench;
  const main = el("main");
  if (!v.built) {
    main.innerHTML = `<div id="bench-head"></div><h2>Arm-seeds</h2><div class="scroll" id="bench-grid"></div>` +
      `<h2>Curves <span class="muted">per arm: the mean over seeds, band: lowest to highest</span></h2><div id="bench-picker"></div><div id="bench-legend"></div><div class="charts" id="bench-charts"></div>` +
      `<h2 id="results-h">Results <span id="results-badge"></span></h2><div id="results-note" class="note"></div><div class="scroll" id="bench-results"></div>` +
      `<h2 id="verdicts-h">Claims <span id="verdicts-badge"></span></h2><div class="scroll" id="bench-verdicts"></div>` +
      `<h2>pass@k <span class="muted">at the final evaluation, mean over the finished seeds, band: lowest to highest</span></h2><div id="passk-legend"></div><div class="charts" id="bench-passk"></div>`;
    v.built = true;
    chartsToo = true;
  }
  const c = b.counts || {};
  el("bench-head").innerHTML = `<h1>${esc(b.name)} ${badge(b.state)}</h1><p class="muted">${c.done || 0} done, ${c.running || 0} running, ${c.failed || 0} failed, ` +
    `${c.pending || 0} pending of ${b.cells.length} arm-seeds. Grid from ${esc(b.spec)}.</p>${b.spec_note ? `<p class="note">${esc(b.spec_note)}</p>` : ""}`;
  el("bench-grid").innerHTML = renderGrid(b);
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
