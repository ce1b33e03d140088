// GET /runs/{id}: one run as a person looks at it, as Buildkite's build waterfall. Its script reads the run's
// JSON (GET /api/v1/runs/{id}, the read model for an active run, run.json for a finished one; every 2 s while
// it runs) and draws each step as a row on the run's time axis: the wait for cards (grey), the run (coloured by
// its result), its cards and why it ended; below, the same steps as a table with their logs, the failed steps'
// log tails shown inline, and under a step with `tests:` its failed and muted tests. Drawn in SVG by the page itself (server/page_kit), nothing from elsewhere.
#include "server/run_page.h"

#include "server/page_kit.h"

namespace pto {

namespace {

const char* kBody = R"HTML(
<h1>run <span id="run-id"></span> <span id="run-state" class="state"></span></h1>
<div id="run-meta" class="muted"></div>
<div id="banner"></div>
<h2>Waterfall <span class="muted">(grey: waiting for cards; bar: running, coloured by result)</span></h2>
<div id="waterfall"></div>
<h2>Steps</h2>
<table id="steps"><thead><tr><th>step</th><th>state</th><th>cards</th><th>waited</th><th>ran</th><th>why it ended / waits</th><th>log</th></tr></thead><tbody></tbody></table>
<p class="muted">Times are UTC. <a href="/">status</a> · <a href="/cards">cards</a> · <a id="json-link" href="#">this run as JSON</a></p>
)HTML";

const char* kScript = R"JS(
const runId = decodeURIComponent(location.pathname.split("/")[2] || "");
const logTails = new Map();  // step id -> its log's tail, fetched once
function steps(run) {
  const out = [];
  for (const j of run.jobs || []) for (const st of j.steps || []) out.push({job: j, st: st});
  return out;
}
function why(st) {
  if (st.state === "waiting") {
    const q = st.queue;
    let t = st.wait_reason || "waiting";
    if (q && q.eta_seconds !== null && q.eta_seconds !== undefined) t += "; expected start in ~" + duration(q.eta_seconds) + " (#" + q.position + ")";
    return t;
  }
  if (st.verdict) return st.verdict;  // what its failures were charged to (cause, cards)
  if (st.error) return st.error;
  if (st.timed_out) return "timed out";
  if (st.signal !== null && st.signal !== undefined) return "signal " + st.signal;
  if (st.exit_code !== null && st.exit_code !== undefined) return "exit " + st.exit_code;
  return "";
}
// A shard of a split step: its tests, what the split expected of it and what it took.
function shardText(s) {
  return "shard " + s.index + "/" + s.count + ": " + s.tests + " tests, expected " +
         (s.expected_seconds === null ? "?" : duration(s.expected_seconds)) + ", took " + (s.seconds === null ? "-" : duration(s.seconds));
}
// A split step's collection: its shards, each with its tests, expected and real duration, and their tests summed.
function splitOf(st) {
  const sp = st.split;
  const td = el("td");
  td.colSpan = 7;
  const t = sp.tests;
  td.appendChild(el("div", "split by duration: " + (sp.collected === null ? "not collected yet" : sp.collected + " tests collected (" +
                 sp.without_duration + " without a learned duration)") + " · " + t.ran + " ran, " + t.passed + " passed" +
                 (t.failed ? ", " + t.failed + " failed" : "") + (t.victims ? ", " + t.victims + " victims" : ""), "muted"));
  const table = el("table", null, "shards");
  table.setAttribute("data-step", st.id);
  const head = row(["shard", "state", "tests", "expected", "took"]);
  head.className = "head";
  table.appendChild(head);
  for (const s of sp.shards) {
    const tr = row([s.index + "/" + sp.shards.length, el("span", s.state, "state " + s.state), s.tests,
                    s.expected_seconds === null ? "?" : duration(s.expected_seconds), s.seconds === null ? "-" : duration(s.seconds)]);
    tr.setAttribute("data-shard", s.index);
    table.appendChild(tr);
  }
  td.appendChild(table);
  return underRow(st, td);
}
// A row under a step's own: what its tests (or its shards) say.
function underRow(st, td) {
  const tr = el("tr", null, "tests-row");
  tr.setAttribute("data-step", st.id);
  tr.appendChild(td);
  return tr;
}
// A step with tests: its failed tests (each at its last attempt) and its muted ones, under its row.
function testsOf(st) {
  if (st.split) return splitOf(st);
  const t = st.tests;
  if (!t) return null;
  const last = new Map();
  for (const c of t.cases || []) if (!last.has(c.id) || last.get(c.id).attempt <= c.attempt) last.set(c.id, c);
  const shown = (t.failed_tests || []).concat([...last.values()].filter(c => c.result === "muted"));
  const counts = t.ran + " ran, " + t.passed + " passed" + (t.failed ? ", " + t.failed + " failed" : "") +
                 (t.victims ? ", " + t.victims + " victims" : "") + (t.flaky ? ", " + t.flaky + " flaky" : "") +
                 (t.muted ? ", " + t.muted + " muted" : "") + (t.skipped ? ", " + t.skipped + " skipped" : "");
  const td = el("td");
  td.colSpan = 7;
  td.appendChild(el("div", "tests: " + counts + (t.error ? " · " + t.error : "") + (st.shard ? " · " + shardText(st.shard) : ""), "muted"));
  if (shown.length) {
    const table = el("table", null, "failed-tests");
    table.setAttribute("data-step", st.id);
    const head = row(["test", "result", "cause", "cards", "attempt", "message", "where"]);
    head.className = "head";
    table.appendChild(head);
    for (const c of shown) {
      const why = c.result === "victim" ? "victim of " + c.victim_of : c.result === "muted" ? "muted: " + (c.muted || "") : (c.message || "").split("\n")[0];
      const where = c.file ? c.file + (c.line ? ":" + c.line : "") : "";
      const tr = row([link("/tests?test=" + encodeURIComponent(c.id), c.id), el("span", c.result, "state " + (c.result === "muted" ? "skipped" : "failed")),
                      c.cause || "", (c.cards || []).join(","), c.attempt, why, where]);
      tr.setAttribute("data-test", c.id);
      tr.setAttribute("data-result", c.result);
      table.appendChild(tr);
    }
    td.appendChild(table);
  }
  return underRow(st, td);
}
function drawWaterfall(run) {
  const list = steps(run);
  const now = Date.now() / 1000;
  const t0 = seconds(run.created) || now;
  let t1 = seconds(run.finished) || now;
  for (const {st} of list) t1 = Math.max(t1, seconds(st.finished) || 0);
  const span = Math.max(1, t1 - t0);
  // Whole step names (pypto-lib's read "pypto-lib-model / Run pypto-lib DeepSeek-V4-Flash decode_swa example"):
  // the names' column is as wide as the longest (11px text, ~6.2px a character), the time axis 720px beside it.
  const names = list.map(({job, st}) => st.label || (job.name + " / " + st.name));
  const longest = names.reduce((m, n) => Math.max(m, n.length), 0);
  const left = Math.max(200, Math.ceil(longest * 6.2) + 16), width = left + 720, right = width - 20, rowH = 22, top = 24;
  const x = t => left + (right - left) * Math.min(1, Math.max(0, (t - t0) / span));
  const box = svg("svg", {width: width, height: top + rowH * list.length + 10, id: "waterfall-svg", role: "img"});
  box.appendChild(svg("title", {}, null)).textContent = "steps of run " + runId + " over time";
  for (let k = 0; k <= 5; ++k) {
    const tx = left + (right - left) * k / 5;
    box.appendChild(svg("line", {x1: tx, x2: tx, y1: 14, y2: top + rowH * list.length, class: "axis"}));
    const label = svg("text", {x: tx, y: 11, "text-anchor": k === 0 ? "start" : k === 5 ? "end" : "middle"});
    label.textContent = "+" + duration(span * k / 5);
    box.appendChild(label);
  }
  list.forEach(({job, st}, i) => {
    const y = top + rowH * i;
    const g = svg("g", {class: "step-row", "data-step": st.id, "data-state": st.state, "data-cards": (st.cards || []).join(",")});
    const name = svg("text", {x: 4, y: y + 14});
    name.textContent = names[i];
    g.appendChild(name);
    const queued = seconds(st.runnable), started = seconds(st.started), ended = seconds(st.finished);
    if (queued !== null && (started !== null || st.state === "waiting")) {
      const until = started !== null ? started : now;
      g.appendChild(svg("rect", {x: x(queued), y: y + 4, width: Math.max(1, x(until) - x(queued)), height: rowH - 8, class: "bar queued"},
                        "waited " + duration(until - queued)));
    }
    if (started !== null) {
      const until = ended !== null ? ended : now;
      const state = st.state === "running" ? "running" : st.state;
      const cards = (st.cards || []).length ? "cards " + st.cards.join(",") : "no card";
      g.appendChild(svg("rect", {x: x(started), y: y + 3, width: Math.max(2, x(until) - x(started)), height: rowH - 6,
                                 class: "bar " + state, "data-step": st.id, "data-card": (st.cards || []).join(",")},
                        st.label + ": " + state + " on " + cards + ", " + duration(until - started) + (why(st) ? " (" + why(st) + ")" : "")));
      const note = svg("text", {x: Math.min(right - 2, x(until) + 4), y: y + 14, class: "muted"});
      note.textContent = cards + (why(st) && st.state !== "succeeded" ? " · " + why(st) : "");
      g.appendChild(note);
    }
    if (st.reused_from) {  // it did not run: drawn apart, with where its result came from
      const note = svg("text", {x: x(seconds(st.finished) || t0) + 4, y: y + 14, class: "muted reused"});
      note.textContent = "reused, not run: " + st.reused_from.text;
      g.appendChild(note);
    }
    box.appendChild(g);
  });
  document.getElementById("waterfall").replaceChildren(box);
}
async function showLog(st, cell) {
  if (!logTails.has(st.id)) {
    logTails.set(st.id, "loading …");
    const r = await fetch(st.log + "?tail=200", {cache: "no-store"});
    logTails.set(st.id, r.ok ? await r.text() : "cannot read the log: HTTP " + r.status);
  }
  cell.replaceChildren(link(st.log, "full log"), el("pre", logTails.get(st.id), "log"));
}
function render(run) {
  document.getElementById("run-id").textContent = run.id;
  const state = document.getElementById("run-state");
  state.textContent = run.state + (run.result !== null && run.result !== undefined ? " (exit " + run.result + ")" : "");
  state.className = "state " + run.state;
  const req = run.request || {};
  const meta = document.getElementById("run-meta");
  meta.replaceChildren(el("span", [req.ref, (req.sha || "").slice(0, 12)].filter(Boolean).join(" ") + " · created " + (run.created || "") +
                               (run.finished ? " · finished " + run.finished : "")));
  if (req.github && req.github.run_url) { meta.appendChild(el("span", " · ")); meta.appendChild(link(req.github.run_url, "Actions run")); }
  const banner = document.getElementById("banner");
  banner.replaceChildren();
  if (run.superseded_by) {
    const b = el("div", "superseded by run ", "banner");
    b.appendChild(link("/runs/" + encodeURIComponent(run.superseded_by), run.superseded_by));
    banner.appendChild(b);
  } else if (run.cancel_reason) {
    banner.appendChild(el("div", run.cancel_reason, "banner"));
  }
  for (const p of run.infrastructure_problems || []) banner.appendChild(el("div", p, "error"));
  drawWaterfall(run);
  const body = document.querySelector("#steps tbody");
  body.replaceChildren();
  for (const {job, st} of steps(run)) {
    const logCell = el("span");
    if (st.log) logCell.appendChild(link(st.log, "log"));
    const ran = seconds(st.started);
    const tr = row([st.label || (job.name + " / " + st.name), el("span", st.state, "state " + st.state), (st.cards || []).join(",") || "-",
                    st.wait_seconds ? duration(st.wait_seconds) : "-", ran !== null ? duration(st.duration_seconds || 0) : "-", why(st), logCell]);
    tr.setAttribute("data-step", st.id);
    body.appendChild(tr);
    const tests = testsOf(st);
    if (tests) body.appendChild(tests);
    // A failed step's log tail inline, as on-call wants it first.
    if ((st.state === "failed" || st.state === "timed_out") && st.log && (logTails.has(st.id) || logTails.size < 8)) showLog(st, logCell);
  }
}
async function load() {
  document.getElementById("json-link").href = "/api/v1/runs/" + encodeURIComponent(runId);
  try {
    const r = await fetch("/api/v1/runs/" + encodeURIComponent(runId), {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    const run = await r.json();
    render(run);
    if (run.state === "running" || run.state === "cancelling") setTimeout(load, 2000);
  } catch (e) {
    document.getElementById("banner").replaceChildren(el("div", "Cannot read run " + runId + ": " + e.message, "error"));
    setTimeout(load, 5000);
  }
}
load();
)JS";

}  // namespace

HttpResponse render_run_page() { return html_page("pto-runner run", kBody, kScript); }

}  // namespace pto
