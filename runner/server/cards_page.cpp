// GET /cards: what on-call looks at first when one card misbehaves. One row per card on a 24-hour time axis:
// the steps and leases that held it (coloured by result: a failure is red on the card it happened on), health
// checks, drains and returns, with the card's state now; below, each card's failures of the day. Its script
// reads GET /api/v1/cards (the read model's card history, read_model/card_history, and the cards' states) every
// 10 s and draws in SVG by itself (server/page_kit), nothing from elsewhere.
#include "server/cards_page.h"

#include "server/page_kit.h"

namespace pto {

namespace {

const char* kBody = R"HTML(
<h1>pto-runner cards <span id="window" class="muted"></span></h1>
<div class="muted">show the last <a href="/cards">24 h</a> · <a href="/cards?hours=1">1 h</a> · <a href="/cards?hours=0.1667">10 min</a></div>
<div id="banner"></div>
<div id="timeline"></div>
<p class="muted"><svg width="12" height="10"><rect width="12" height="10" class="ev held"/></svg> held now
<svg width="12" height="10"><rect width="12" height="10" class="ev succeeded"/></svg> step succeeded
<svg width="12" height="10"><rect width="12" height="10" class="ev failed"/></svg> step failed
<svg width="12" height="10"><rect width="12" height="10" class="ev lease"/></svg> lease
<svg width="12" height="10"><rect width="12" height="10" class="ev check-passed"/></svg> health check passed
<svg width="12" height="10"><rect width="12" height="10" class="ev check-failed"/></svg> health check failed
<svg width="12" height="10"><rect width="12" height="10" class="ev drain"/></svg> drained
<svg width="12" height="10"><rect width="12" height="10" class="ev return"/></svg> back in service</p>
<h2>Failures of the day, by card</h2>
<table id="failures"><thead><tr><th>card</th><th>when</th><th>what</th><th>result</th><th>why</th><th>run</th></tr></thead><tbody></tbody></table>
<p class="muted">Times are UTC. <a href="/">status</a> · <a href="/api/v1/cards">this as JSON</a></p>
)HTML";

const char* kScript = R"JS(
function failed(e) {
  return (e.kind === "step" && e.result !== "succeeded" && e.result !== "cancelled") || (e.kind === "health-check" && e.result === "failed");
}
function eventClass(e) {
  if (e.kind === "step") return "ev " + (failed(e) ? "failed" : e.result === "succeeded" ? "succeeded" : "cancelled");
  if (e.kind === "lease") return "ev lease";
  if (e.kind === "health-check") return "ev " + (e.result === "failed" ? "check-failed" : "check-passed");
  return "ev " + e.kind;  // drain, return
}
function hhmm(epoch) { return new Date(epoch * 1000).toISOString().slice(11, 16); }
// ?hours=N narrows the axis to the last N hours (of the day the API returns), for a close look at one incident.
// Without it the axis spans what there is to see: from the oldest event or hold of the day (at least 10 min),
// so a new host's first hour is not a sliver at the end of a 24-hour axis.
const asked = Number(new URLSearchParams(location.search).get("hours"));
function held(c) { return c.holder ? {kind: c.holder.label.startsWith("lease ") ? "lease" : "held", start: Date.parse(c.holder.since) / 1000} : null; }
function draw(data) {
  const t1 = data.to_epoch;
  let oldest = t1;
  for (const e of data.events || []) oldest = Math.min(oldest, e.start);
  for (const c of data.cards || []) if (held(c) && held(c).start) oldest = Math.min(oldest, held(c).start);
  const hours = asked > 0 ? Math.min(24, Math.max(0.01, asked)) : Math.min(24, Math.max(1 / 6, (t1 - oldest) * 1.05 / 3600));
  const t0 = Math.max(data.from_epoch, t1 - hours * 3600), span = Math.max(1, t1 - t0);
  document.getElementById("window").textContent = hours === 24 ? "the last 24 h" : "the last " + duration(hours * 3600);
  const left = 220, width = 1100, right = width - 10, rowH = 30, top = 22;
  const x = t => left + (right - left) * Math.min(1, Math.max(0, (t - t0) / span));
  const cards = data.cards || [];
  const box = svg("svg", {width: width, height: top + rowH * cards.length + 6, id: "cards-svg", role: "img"});
  for (let k = 0; k <= 8; ++k) {
    const t = t0 + span * k / 8, tx = x(t);
    box.appendChild(svg("line", {x1: tx, x2: tx, y1: 14, y2: top + rowH * cards.length, class: "axis"}));
    const label = svg("text", {x: tx, y: 11, "text-anchor": k === 0 ? "start" : k === 8 ? "end" : "middle"});
    label.textContent = span > 2 * 3600 ? hhmm(t) : new Date(t * 1000).toISOString().slice(11, 19);
    box.appendChild(label);
  }
  const byCard = new Map(cards.map(c => [c.id, []]));
  for (const e of data.events || []) if (byCard.has(e.card) && e.end >= t0) byCard.get(e.card).push(e);
  // Failures drawn last, so a red bar is never hidden under the day's green ones.
  for (const list of byCard.values()) list.sort((a, b) => failed(a) - failed(b));
  cards.forEach((c, i) => {
    const y = top + rowH * i;
    const g = svg("g", {class: "card-row", "data-card": c.id, "data-state": c.state});
    const name = svg("text", {x: 4, y: y + 18});
    name.textContent = "card " + c.id + (c.type ? " (" + c.type + ")" : "") + ": " + c.state + (c.drain_reason ? " - " + c.drain_reason : "");
    g.appendChild(name);
    g.appendChild(svg("line", {x1: left, x2: right, y1: y + rowH - 2, y2: y + rowH - 2, class: "axis"}));
    for (const e of byCard.get(c.id)) {
      const tip = (e.label ? e.label + ": " : "") + e.kind + " " + e.result + (e.detail ? " (" + e.detail + ")" : "") +
                  ", " + e.started.slice(11, 19) + "-" + e.ended.slice(11, 19) + (e.run ? ", run " + e.run : "");
      const attrs = {class: eventClass(e), "data-card": c.id, "data-kind": e.kind, "data-result": e.result};
      if (e.run) attrs["data-run"] = e.run;
      if (e.kind === "drain" || e.kind === "return") {
        Object.assign(attrs, {x: x(e.start) - 2, y: y + 1, width: 4, height: rowH - 4});
      } else {
        const h = e.kind === "step" ? rowH - 10 : e.kind === "lease" ? rowH - 16 : 6;
        Object.assign(attrs, {x: x(e.start), y: y + (rowH - 2 - h) - 2, width: Math.max(failed(e) ? 3 : 1, x(e.end) - x(e.start)), height: h});
      }
      const shape = svg("rect", attrs, tip);
      if (e.run) {
        const a = svg("a", {href: "/runs/" + encodeURIComponent(e.run)});
        a.appendChild(shape);
        g.appendChild(a);
      } else {
        g.appendChild(shape);
      }
    }
    const now = held(c);
    if (now && now.start) {  // held at this moment: a bar from when it was taken to now, to its run's page
      const h = now.kind === "lease" ? rowH - 16 : rowH - 10;
      const attrs = {class: "ev " + now.kind, "data-card": c.id, "data-kind": now.kind, "data-holder": c.holder.label,
                     x: x(now.start), y: y + (rowH - 2 - h) - 2, width: Math.max(2, x(t1) - x(now.start)), height: h};
      const shape = svg("rect", attrs, c.holder.label + ": holding it since " + c.holder.since.slice(11, 19));
      if (c.holder.run) {
        const a = svg("a", {href: "/runs/" + encodeURIComponent(c.holder.run)});
        a.appendChild(shape);
        g.appendChild(a);
      } else {
        g.appendChild(shape);
      }
    }
    box.appendChild(g);
  });
  box.appendChild(svg("line", {x1: x(t1), x2: x(t1), y1: 14, y2: top + rowH * cards.length, class: "now"}));
  document.getElementById("timeline").replaceChildren(box);
  const fails = (data.events || []).filter(failed).sort((a, b) => a.card - b.card || b.end - a.end);
  fill("failures", fails.map(e => row([e.card, e.ended.replace("T", " ").replace(/\.\d+Z$/, "Z"), e.label, e.result, e.detail,
                                       e.run ? link("/runs/" + encodeURIComponent(e.run), e.run) : ""])), "no failure on any card today");
}
async function load() {
  try {
    const r = await fetch("/api/v1/cards", {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    draw(await r.json());
    document.getElementById("banner").replaceChildren();
  } catch (e) {
    document.getElementById("banner").replaceChildren(el("div", "Cannot read /api/v1/cards: " + e.message + " (retrying)", "error"));
  }
}
load();
setInterval(load, 10000);
)JS";

}  // namespace

HttpResponse render_cards_page() { return html_page("pto-runner cards", kBody, kScript); }

}  // namespace pto
