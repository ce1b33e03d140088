// GET /bisections/{id}: where a bisection stands, as a person reads it (SPEC "Find the commit"): the range and
// what it probes, the failure rate measured at bad and the repeats each verdict takes, every commit of the path
// with its verdict (good, bad, untested), the culprit or why it ended, and every probe with its run's link.
// Its script reads GET /api/v1/bisections/{id} every 2 s while it runs and draws by itself (server/page_kit).
#include "server/bisection_page.h"

#include "server/page_kit.h"

namespace pto {

namespace {

const char* kBody = R"HTML(
<h1>pto-runner bisection <span id="bid" class="muted"></span></h1>
<div id="banner"></div>
<div id="summary"></div>
<h2>Commits <span class="muted">(first-parent path, oldest first)</span></h2>
<table id="commits"><thead><tr><th>#</th><th>commit</th><th>subject</th><th>verdict</th><th>probes</th></tr></thead><tbody></tbody></table>
<h2>Probes</h2>
<table id="probes"><thead><tr><th>commit</th><th>phase</th><th>result</th><th>what it said</th><th>run</th></tr></thead><tbody></tbody></table>
<p class="muted"><a href="/">status</a> · <a id="json-link" href="/api/v1/bisections">this as JSON</a></p>
)HTML";

const char* kScript = R"JS(
const bid = location.pathname.split("/").pop();
function short(sha) { return (sha || "").slice(0, 12); }
function draw(b) {
  document.getElementById("bid").textContent = b.id;
  const s = b.spec;
  const what = (s.test ? "test " + s.test + " of " : "") + "step " + (s.step || "(the last)") + " of job " + s.job;
  const rate = b.failure_rate === null ? "" : " · failure rate at bad " + (b.failure_rate * 100).toFixed(0) + "%";
  const summary = document.getElementById("summary");
  summary.replaceChildren(el("div", b.state + ": " + what + ", " + short(s.good) + " (good) .. " + short(s.bad) + " (bad) · " +
                                     b.commits.length + " commits · " + b.repeats + " probe(s) per verdict" + rate + " · " + b.runs_used + " runs"));
  summary.setAttribute("data-state", b.state);
  if (b.culprit) {
    const c = el("div", "first bad commit: " + b.culprit, "banner");
    c.id = "culprit";
    summary.appendChild(c);
  }
  if (b.error) summary.appendChild(el("div", b.error, "error"));
  const byCommit = new Map();
  for (const p of b.probes) {
    if (!byCommit.has(p.sha)) byCommit.set(p.sha, []);
    byCommit.get(p.sha).push(p);
  }
  const lastGood = b.commits.indexOf(b.last_good), firstBad = b.commits.indexOf(b.first_bad);
  fill("commits", b.commits.map((sha, i) => {
    const verdict = i <= lastGood ? "good" : i >= firstBad ? "bad" : "untested";
    const probes = (byCommit.get(sha) || []).map(p => p.result).join(", ");
    const tr = row([i + 1, sha, (b.subjects || [])[i] || "", el("span", verdict, "state " + (verdict === "bad" ? "failed" : verdict === "good" ? "succeeded" : "skipped")), probes]);
    tr.setAttribute("data-commit", sha);
    tr.setAttribute("data-verdict", verdict);
    return tr;
  }), "no commits");
  fill("probes", b.probes.map(p => {
    const tr = row([short(p.sha), p.phase, p.result, p.detail || "", p.run ? link("/runs/" + encodeURIComponent(p.run), p.run) : ""]);
    tr.setAttribute("data-result", p.result);
    return tr;
  }), "no probes yet");
}
async function load() {
  const api = "/api/v1/bisections/" + encodeURIComponent(bid);
  document.getElementById("json-link").href = api;
  const banner = document.getElementById("banner");
  try {
    const r = await fetch(api, {cache: "no-store"});
    const b = await r.json();
    if (!r.ok) throw new Error(b.error || "HTTP " + r.status);
    banner.replaceChildren();
    draw(b);
    if (b.state === "running") setTimeout(load, 2000);
  } catch (e) {
    banner.replaceChildren(el("div", "Cannot read the bisection: " + e.message, "error"));
  }
}
load();
)JS";

}  // namespace

HttpResponse render_bisection_page() { return html_page("pto-runner bisection", kBody, kScript); }

}  // namespace pto
