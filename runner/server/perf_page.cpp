// GET /perf: each perf metric's series on a ref, drawn as SVG (SPEC "Performance, judged like an experiment"):
// every run's samples as dots, its median as a line through them, and a mark where a change began (a run whose
// verdict says slower or faster), with the card type and unit. ?ref= (default refs/heads/main) picks the ref,
// ?metric= one metric. Its script reads GET /api/v1/perf (store/perf_history) and draws by itself
// (server/page_kit).
#include "server/perf_page.h"

#include "server/page_kit.h"

namespace pto {

namespace {

const char* kBody = R"HTML(
<h1>pto-runner perf <span id="ref" class="muted"></span></h1>
<form id="pick" class="muted">ref <input id="ref-input" name="ref" size="40"> <button>show</button></form>
<div id="banner"></div>
<div id="series"></div>
<p class="muted">Each dot is a sample, the line each run's median, a red mark the run where a change began (its verdict on
hover). Times are UTC. <a href="/">status</a> · <a href="/tests">tests</a> · <a id="json-link" href="/api/v1/perf">this as JSON</a></p>
)HTML";

const char* kScript = R"JS(
const params = new URLSearchParams(location.search);
const ref = params.get("ref") || "refs/heads/main";
const only = params.get("metric");
function draw(d) {
  const box = el("div", "", "perf-series");
  box.setAttribute("data-metric", d.metric);
  const runs = d.series;
  const unit = runs.length ? runs[runs.length - 1].unit : "";
  const types = [...new Set(runs.map(r => r.card_type || "any"))].join(", ");
  box.appendChild(el("h2", d.metric + (unit ? " (" + unit + ")" : "") + " · cards " + types + " · " + runs.length + " runs"));
  const values = runs.flatMap(r => r.samples.concat(r.base_samples || []));
  if (!values.length) { box.appendChild(el("p", "no samples", "muted")); return box; }
  const lo = Math.min(...values), hi = Math.max(...values), pad = (hi - lo) * 0.1 || hi * 0.05 || 1;
  const W = 720, H = 220, L = 60, R = 10, T = 10, B = 24;
  const x = i => L + (runs.length === 1 ? (W - L - R) / 2 : i * (W - L - R) / (runs.length - 1));
  const y = v => T + (H - T - B) * (1 - (v - (lo - pad)) / ((hi + pad) - (lo - pad)));
  const s = svg("svg", {width: W, height: H, role: "img", class: "perf-chart"});
  for (const v of [lo, (lo + hi) / 2, hi]) {
    s.appendChild(svg("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), class: "axis"}));
    const label = svg("text", {x: 4, y: y(v) + 4});
    label.textContent = v.toFixed(1);
    s.appendChild(label);
  }
  let path = "";
  runs.forEach((r, i) => {
    path += (i ? " L " : "M ") + x(i).toFixed(1) + " " + y(r.median).toFixed(1);
    // svg()'s text is its hover title: the run, its commit, median and verdict.
    const g = svg("g", {class: "perf-run", "data-run": r.run, "data-change": r.change || "none"},
                  r.run + " · " + (r.commit || "").slice(0, 12) + " · median " + r.median.toFixed(2) + " " + r.unit + " · " + r.verdict);
    for (const v of r.samples) g.appendChild(svg("circle", {cx: x(i), cy: y(v), r: 2.5, class: "sample"}));
    for (const v of r.base_samples || []) g.appendChild(svg("circle", {cx: x(i) + 4, cy: y(v), r: 2, class: "base-sample"}));
    s.appendChild(g);
    if (r.change === "slower" || r.change === "faster") {
      s.appendChild(svg("line", {x1: x(i), x2: x(i), y1: T, y2: H - B, class: "change-point", "data-change": r.change, "data-run": r.run}, r.verdict));
    }
  });
  s.appendChild(svg("path", {d: path, class: "median"}));
  box.appendChild(s);
  const changes = runs.filter(r => r.change === "slower" || r.change === "faster");
  const list = el("ul", "", "changes");
  for (const r of changes) {
    const li = el("li", "");
    li.setAttribute("data-change", r.change);
    li.appendChild(link("/runs/" + encodeURIComponent(r.run), r.run));
    li.appendChild(document.createTextNode(": " + r.verdict));
    list.appendChild(li);
  }
  if (changes.length) box.appendChild(list);
  return box;
}
async function load() {
  document.getElementById("ref").textContent = ref;
  document.getElementById("ref-input").value = ref;
  const banner = document.getElementById("banner");
  const out = document.getElementById("series");
  try {
    const kept = await getJSON("/api/v1/perf");
    const metrics = [...new Set(kept.metrics.filter(m => m.ref === ref && (!only || m.metric === only)).map(m => m.metric))];
    if (!metrics.length) out.appendChild(el("p", "no perf history on " + ref, "muted"));
    for (const m of metrics) {
      const api = "/api/v1/perf?metric=" + encodeURIComponent(m) + "&ref=" + encodeURIComponent(ref);
      document.getElementById("json-link").href = api;
      out.appendChild(draw(await getJSON(api)));
    }
  } catch (e) {
    banner.appendChild(el("div", "Cannot read the perf history: " + e.message, "error"));
  }
}
load();
)JS";

}  // namespace

HttpResponse render_perf_page() { return html_page("pto-runner perf", kBody, kScript); }

}  // namespace pto
