// GET /tests: what a maintainer reads before muting or fixing a test, as Buildkite Test Engine's and GitLab's
// test pages. For one ref (?ref=, default refs/heads/main) over tests.window-days: the flaky tests (flip rate),
// the muted ones (reason, until, who), the slowest and the most failing; with ?test=ID one test's history
// (every result, its card and run, and its counts per ref). Its script reads GET /api/v1/tests?ref= and
// GET /api/v1/tests/{id} (store/case_history_queries) and draws by itself (server/page_kit).
#include "server/tests_page.h"

#include "server/page_kit.h"

namespace pto {

namespace {

const char* kBody = R"HTML(
<h1>pto-runner tests <span id="ref" class="muted"></span></h1>
<form id="pick" class="muted">ref <input id="ref-input" name="ref" size="40"> <button>show</button></form>
<div id="banner"></div>
<div id="summary" class="muted"></div>
<div id="one" hidden>
<h2>History of <span id="test-id"></span></h2>
<div id="test-muted"></div>
<table id="test-refs"><thead><tr><th>ref</th><th>runs</th><th>failed</th><th>flaky</th><th>flip rate</th><th>mean</th><th>last</th></tr></thead><tbody></tbody></table>
<table id="test-results"><thead><tr><th>when</th><th>ref</th><th>result</th><th>cause</th><th>cards</th><th>attempt</th><th>duration</th><th>message</th><th>run</th></tr></thead><tbody></tbody></table>
</div>
<h2>Flaky <span class="muted">(flip rate: changes between pass and fail per result, card failures left out)</span></h2>
<table id="flaky"><thead><tr><th>test</th><th>flip rate</th><th>flaky</th><th>failed</th><th>runs</th><th>last</th></tr></thead><tbody></tbody></table>
<h2>Muted</h2>
<table id="muted"><thead><tr><th>test</th><th>reason</th><th>until</th><th>by</th><th>in force</th></tr></thead><tbody></tbody></table>
<h2>Most failing</h2>
<table id="failing"><thead><tr><th>test</th><th>failed</th><th>runs</th><th>flaky</th><th>last</th></tr></thead><tbody></tbody></table>
<h2>Slowest <span class="muted">(mean of their last attempts)</span></h2>
<table id="slowest"><thead><tr><th>test</th><th>mean</th><th>max</th><th>runs</th></tr></thead><tbody></tbody></table>
<p class="muted">Times are UTC. <a href="/">status</a> · <a href="/cards">cards</a> · <a id="json-link" href="/api/v1/tests">this as JSON</a></p>
)HTML";

const char* kScript = R"JS(
const params = new URLSearchParams(location.search);
const ref = params.get("ref") || "refs/heads/main";
const oneTest = params.get("test");
function testLink(id) {
  const a = link("/tests?ref=" + encodeURIComponent(ref) + "&test=" + encodeURIComponent(id), id);
  return a;
}
function secs(v) { return v < 1 ? (v * 1000).toFixed(0) + " ms" : v.toFixed(1) + " s"; }
function tagged(tr, id) { tr.setAttribute("data-test", id); return tr; }
function drawRef(d) {
  document.getElementById("ref").textContent = d.ref;
  document.getElementById("summary").textContent = d.tests + " tests since " + (d.since || "").slice(0, 10) + " (" + d.window_days +
      " days) · " + d.failures + " failures · " + (d.muted || []).filter(m => m.in_force).length + " muted";
  fill("flaky", d.flaky.map(t => tagged(row([testLink(t.id), (t.flip_rate * 100).toFixed(1) + "%", t.flaky, t.failed, t.runs, t.last_result]), t.id)),
       "no flaky test on this ref");
  fill("muted", (d.muted || []).map(m => tagged(row([m.id, m.reason, m.until, m.by, m.in_force ? "yes" : "expired"]), m.id)), "nothing is muted");
  fill("failing", d.most_failing.map(t => tagged(row([testLink(t.id), t.failed, t.runs, t.flaky, t.last_result]), t.id)), "no failing test on this ref");
  fill("slowest", d.slowest.map(t => tagged(row([testLink(t.id), secs(t.mean_duration), secs(t.max_duration), t.runs]), t.id)), "no test results yet");
}
function drawOne(d) {
  document.getElementById("one").hidden = false;
  document.getElementById("test-id").textContent = d.id;
  document.getElementById("test-muted").replaceChildren(d.muted ? el("div", "muted until " + d.muted.until + ": " + d.muted.reason, "banner") : el("span"));
  fill("test-refs", d.refs.map(r => row([r.ref, r.runs, r.failed, r.flaky, (r.flip_rate * 100).toFixed(1) + "%", secs(r.mean_duration), r.last_result])), "none");
  fill("test-results", d.results.map(r => {
    const tr = row([r.at.replace("T", " ").replace(/\.\d+Z$/, "Z"), r.ref, el("span", r.result, "state " + (r.result === "passed" ? "succeeded" : r.result === "skipped" ? "skipped" : "failed")),
                    r.cause || "", (r.cards || []).join(","), r.attempt, secs(r.duration), r.message || "", link("/runs/" + encodeURIComponent(r.run), r.run)]);
    tr.setAttribute("data-result", r.result);
    return tr;
  }), "no result kept");
}
async function load() {
  document.getElementById("ref-input").value = ref;
  const api = "/api/v1/tests?ref=" + encodeURIComponent(ref);
  document.getElementById("json-link").href = api;
  const banner = document.getElementById("banner");
  banner.replaceChildren();
  try {
    drawRef(await getJSON(api));
    if (oneTest) drawOne(await getJSON("/api/v1/tests/" + encodeURIComponent(oneTest)));
  } catch (e) {
    banner.appendChild(el("div", "Cannot read the test history: " + e.message, "error"));
  }
}
load();
)JS";

}  // namespace

HttpResponse render_tests_page() { return html_page("pto-runner tests", kBody, kScript); }

}  // namespace pto
