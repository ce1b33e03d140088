// GET /: the status page for a person (an on-call engineer at 3 a.m.). One self-contained HTML document: no
// asset from outside the daemon; its script reads /api/v1/status (the same read model as the JSON and
// /metrics) every 2 s and draws cards, the queue with waiting reasons and expected starts, active and recent
// runs, with links to each run's page (server/run_page), the cards page (server/cards_page), step logs and
// GitHub Actions runs. The shared style and helpers are server/page_kit's. Every text from a definition or a request goes in through textContent,
// never as HTML; links are only the daemon's own paths or the http(s) run URL the server checked.
#include "server/status_page.h"

#include "server/page_kit.h"

namespace pto {

namespace {

const char* kBody = R"HTML(
<h1>pto-runner <span id="version" class="muted"></span></h1>
<div id="summary" class="muted">loading /api/v1/status …</div>
<nav class="muted">pages: <a id="nav-cards" href="/cards">cards</a> (each card's day) · <a id="nav-tests" href="/tests">tests</a> (flaky, muted, slowest, most failing) · <a id="nav-perf" href="/perf">perf</a> (each metric's series, where it changed) · <a href="#bisections-title">bisections</a></nav>
<div id="banner"></div>
<div id="slurm" hidden>
<h2>Slurm nodes</h2>
<table id="nodes"><thead><tr><th>node</th><th>state</th><th>features</th><th>cards in use</th><th>our steps there (cards, Slurm job)</th></tr></thead><tbody></tbody></table>
</div>
<h2 id="cards-title">Cards <a id="cards-page" href="/cards" class="muted">(each card's day)</a></h2>
<table id="cards"><thead><tr><th>card</th><th>type</th><th>group</th><th>state</th><th>held by / reason</th><th>since</th></tr></thead><tbody></tbody></table>
<h2>Queue <span id="queue-count" class="muted"></span></h2>
<table id="queue"><thead><tr><th>#</th><th>step</th><th>cards</th><th>waiting because</th><th>waited</th><th>expected start</th><th>why here (priority, its run's card-time)</th></tr></thead><tbody></tbody></table>
<h2>Active runs</h2>
<table id="active"><thead><tr><th>run</th><th>state</th><th>steps</th><th>running now (logs)</th><th>commit</th><th>started</th><th>GitHub</th></tr></thead><tbody></tbody></table>
<h2>Recent runs</h2>
<table id="recent"><thead><tr><th>run</th><th>result</th><th>failed steps (logs)</th><th>commit</th><th>finished</th><th>GitHub</th></tr></thead><tbody></tbody></table>
<h2 id="bisections-title">Bisections</h2>
<table id="bisections"><thead><tr><th>bisection</th><th>state</th><th>job / step</th><th>first bad commit</th><th>probe runs</th><th>started</th></tr></thead><tbody></tbody></table>
<p class="muted">Times are UTC. The page reads <a href="/api/v1/status">/api/v1/status</a> every 2 s; metrics: <a href="/metrics">/metrics</a>.</p>
)HTML";

const char* kScript = R"JS(
// A run's link goes to its page (its JSON is linked from there).
function runPage(id) { return "/runs/" + encodeURIComponent(id); }
function holder(d) {
  const box = el("span");
  if (d.holder) {
    if (d.holder.log_url) box.appendChild(link(d.holder.log_url, d.holder.label));
    else box.appendChild(el("span", d.holder.label));
    if (d.holder.run) {
      box.appendChild(el("span", " · run ", "muted"));
      box.appendChild(link(runPage(d.holder.run), d.holder.run));
    }
    if (d.holder.other_program) box.appendChild(el("span", " (not a pto-runner step)", "muted"));
  }
  if (d.drain_reason) {
    if (d.holder) box.appendChild(el("br"));
    box.appendChild(el("span", "drained: " + d.drain_reason, "drained"));
  }
  if (d.reserved_for) box.appendChild(el("span", "kept free for queue entry #" + d.reserved_for, "muted"));
  return box;
}
// The steps worth opening a log for: an active run's running steps (in the status itself), a finished run's
// failed ones (read once from the run's own JSON: a finished run never changes).
const finishedSteps = new Map();
async function failedStepLogs(run) {
  if (finishedSteps.has(run)) return finishedSteps.get(run);
  const r = await fetch("/api/v1/runs/" + encodeURIComponent(run), {cache: "no-store"});
  if (!r.ok) return [];
  const j = await r.json();
  const out = [];
  for (const job of j.jobs || [])
    for (const st of job.steps || [])
      if ((st.state === "failed" || st.state === "timed_out") && st.log) out.push({label: st.label || st.name, url: st.log});
  finishedSteps.set(run, out);
  return out;
}
function logLinks(box, list) {
  for (const st of list.slice(0, 5)) {
    if (box.childNodes.length) box.appendChild(el("br"));
    box.appendChild(link(st.url, st.label));
  }
  if (list.length > 5) box.appendChild(el("span", " and " + (list.length - 5) + " more", "muted"));
  return box;
}
function runningCell(r) {
  return logLinks(el("span"), (r.running_steps || []).map(st => ({label: st.step, url: st.log_url})));
}
function failedCell(run) {
  const box = el("span");
  failedStepLogs(run).then(list => logLinks(box, list)).catch(() => {});
  return box;
}
function render(s) {
  document.getElementById("version").textContent = s.version + " (" + s.commit + ")";
  const counts = Object.entries(s.devices_by_state || {}).map(([k, v]) => v + " " + k).join(", ");
  document.getElementById("summary").textContent =
      "up " + duration(s.uptime_seconds) + " · " + s.devices.length + " cards: " + counts +
      " · " + s.queue_total + " waiting · " + s.active_runs.length + " active run(s) · PTOAS " +
      (s.toolchain.pin.version || "?") + " " + s.toolchain.state + (s.simulate ? " · simulated cards" : "");
  const banner = document.getElementById("banner");
  banner.replaceChildren();
  if (s.draining) banner.appendChild(el("div", "Draining (SIGTERM): accepted runs go on to their end; new runs are refused.", "banner"));
  if (s.sandbox && !s.sandbox.active)
    banner.appendChild(el("div", "No sandbox: pull requests' steps run as the daemon's own user (" + s.sandbox.why_not + ").", "banner"));
  else if (s.sandbox && s.sandbox.waiting.length)
    banner.appendChild(el("div", s.sandbox.waiting.length + " run(s) wait for a free sandbox user (" + s.sandbox.lent + " of " + s.sandbox.users + " lent).", "banner"));
  const slurm = s.executor === "slurm";
  document.getElementById("slurm").hidden = !slurm;
  document.getElementById("cards-title").hidden = document.getElementById("cards").hidden = slurm;
  if (slurm) {
    if (s.slurm_problem) banner.appendChild(el("div", "Slurm does not answer: " + s.slurm_problem, "banner"));
    fill("nodes", (s.nodes || []).map(n => {
      const steps = el("span");
      for (const st of n.steps) {
        if (steps.childNodes.length) steps.appendChild(el("br"));
        steps.appendChild(link(st.log_url, st.label));
        steps.appendChild(el("span", " · cards " + st.cards.join(",") + " · job " + st.slurm_job, "muted"));
      }
      const state = el("span", n.state + (n.drained ? " (drained)" : ""), "state " + (n.drained ? "drained" : n.state));
      if (n.reason) { state.appendChild(el("br")); state.appendChild(el("span", n.reason, "muted")); }
      return row([n.name, state, n.features, n.cards_used + " of " + n.cards, steps]);
    }), "Slurm has shown no node yet");
  }
  fill("cards", s.devices.map(d => row([d.id, d.type || "", (d.group || []).join(","), el("span", d.state, "state " + d.state),
                                        holder(d), when(d.since)])), "no cards");
  document.getElementById("queue-count").textContent =
      "(" + s.queue_total + (s.queue_total > s.queue.length ? ", first " + s.queue.length + " shown" : "") + ")";
  fill("queue", s.queue.map(q => {
    const step = el("span");
    step.appendChild(q.run ? link(runPage(q.run), q.step) : el("span", q.step));
    if (q.run) step.appendChild(el("span", " · run " + q.run, "muted"));
    const eta = q.eta_seconds === null || q.eta_seconds === undefined ? el("span", "unknown", "muted")
                                                                       : el("span", "in ~" + duration(q.eta_seconds));
    const why = q.why ? "priority " + q.why.priority + (q.why.priority_rule ? " (" + q.why.priority_rule + ")" : "") +
                        ", " + duration(q.why.run_card_seconds) + " of card-time used" : "";
    return row([q.position, step, q.devices, q.reason, duration(q.wait_seconds), eta, why]);
  }), "nothing waits");
  fill("active", s.active_runs.map(r => row([link(runPage(r.id), r.id), el("span", r.state, "state"),
      r.steps_finished + "/" + r.steps + " done, " + r.steps_running + " running, " + r.steps_waiting + " waiting",
      runningCell(r), (r.sha || "").slice(0, 12) + (r.ref ? " " + r.ref : ""), when(r.created),
      r.github_run ? link(r.github_run, "Actions run") : ""])), "no active run");
  fill("recent", (s.recent_runs || []).map(r => row([link(runPage(r.id), r.id),
      el("span", r.state + (r.result !== null ? " (exit " + r.result + ")" : ""), "state " + r.state),
      r.state === "succeeded" ? "" : failedCell(r.id), (r.sha || "").slice(0, 12), when(r.finished), r.github_run ? link(r.github_run, "Actions run") : ""])), "none yet");
}
async function refresh() {
  try {
    const r = await fetch("/api/v1/status", {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
    document.getElementById("banner").querySelectorAll(".error").forEach(e => e.remove());
  } catch (e) {
    const banner = document.getElementById("banner");
    banner.replaceChildren(el("div", "Cannot read /api/v1/status: " + e.message + " (retrying)", "error"));
  }
}
// Bisections change in minutes, not seconds: read every 10 s.
async function refreshBisections() {
  try {
    const r = await fetch("/api/v1/bisections", {cache: "no-store"});
    if (!r.ok) return;
    const list = ((await r.json()).bisections || []).slice(0, 20);  // the API's order: newest first
    fill("bisections", list.map(b => row([link("/bisections/" + encodeURIComponent(b.id), b.id), el("span", b.state, "state " + b.state),
        ((b.spec || {}).job || "") + ((b.spec || {}).step ? " / " + b.spec.step : "") + ((b.spec || {}).test ? " (" + b.spec.test + ")" : ""),
        b.culprit ? String(b.culprit).slice(0, 12) : (b.error || ""), b.runs_used, when(b.created)])), "none yet");
  } catch (e) {}
}
refresh();
setInterval(refresh, 2000);
refreshBisections();
setInterval(refreshBisections, 10000);
)JS";

}  // namespace

HttpResponse render_status_page() { return html_page("pto-runner", kBody, kScript); }

}  // namespace pto
