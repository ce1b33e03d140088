#include "server/page_kit.h"

namespace pto {

namespace {

const char* kStyle = R"CSS(
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.2em; background: #fafafa; color: #222; }
  h1 { font-size: 1.3em; margin: 0 0 .2em; }
  h2 { font-size: 1.05em; margin: 1.4em 0 .4em; }
  table { border-collapse: collapse; width: 100%; background: #fff; }
  th, td { text-align: left; padding: .25em .6em; border-bottom: 1px solid #e4e4e4; vertical-align: top; }
  th { background: #f0f0f0; font-weight: 600; }
  .state { font-weight: 600; }
  .free { color: #1a7f37; } .busy { color: #0550ae; } .reserved { color: #9a6700; } .drained { color: #cf222e; }
  .succeeded { color: #1a7f37; } .failed, .interrupted { color: #cf222e; } .cancelled { color: #6e7781; }
  .muted { color: #6e7781; } .banner { padding: .5em .8em; background: #fff8c5; border: 1px solid #d4a72c; margin: .6em 0; }
  .error { padding: .5em .8em; background: #ffebe9; border: 1px solid #cf222e; margin: .6em 0; }
  code { font-size: .95em; }
  svg text { font: 11px system-ui, sans-serif; }
  .bar.succeeded, .ev.succeeded { fill: #2da44e; } .bar.failed, .bar.timed_out, .ev.failed, .ev.timed_out { fill: #cf222e; }
  .bar.cancelled, .bar.interrupted, .bar.skipped, .ev.cancelled { fill: #8c959f; } .bar.running { fill: #0969da; }
  .bar.queued { fill: #d0d7de; } .ev.lease { fill: #8250df; } .ev.held { fill: #0969da; } .ev.check-passed { fill: #4ac26b; } .ev.check-failed { fill: #a40e26; }
  .ev.drain { fill: #cf222e; } .ev.return { fill: #1a7f37; } .axis { stroke: #d0d7de; } .now { stroke: #9a6700; }
  .sample { fill: #0969da; opacity: .6; } .base-sample { fill: #8c959f; opacity: .6; } .median { fill: none; stroke: #0550ae; stroke-width: 1.5; }
  .change-point { stroke: #cf222e; stroke-width: 2; stroke-dasharray: 4 3; }
  pre.log { background: #fff; border: 1px solid #e4e4e4; padding: .5em; max-height: 24em; overflow: auto; font-size: 12px; }
)CSS";

// The kit: el, link, ago, duration, when, row, fill; svg() for drawings; getJSON() for this daemon's API.
const char* kKit = R"JS(
"use strict";
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function link(href, text) {
  // Only the daemon's own paths and http(s) URLs (the server checked the GitHub run URL).
  if (typeof href !== "string" || !(href.startsWith("/") || /^https?:\/\//.test(href))) return el("span", text);
  const a = el("a", text);
  a.href = href;
  return a;
}
function ago(iso) {
  if (!iso) return "";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  return duration(s) + " ago";
}
function duration(s) {
  s = Math.round(s);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
}
function when(iso) {
  // Relative and absolute: "12m 3s ago (2026-11-30 03:02:11Z)".
  if (!iso) return el("span", "");
  const span = el("span", ago(iso) + " ");
  span.appendChild(el("span", "(" + iso.replace("T", " ").replace(/\.\d+Z$/, "Z") + ")", "muted"));
  return span;
}
function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement("td");
    if (c instanceof Node) td.appendChild(c); else td.textContent = c === undefined || c === null ? "" : String(c);
    tr.appendChild(td);
  }
  return tr;
}
function fill(id, rows, empty) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  for (const r of rows) body.appendChild(r);
  if (rows.length === 0) body.appendChild(row([el("span", empty, "muted")]));
}
const SVGNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined && text !== null) {
    const t = document.createElementNS(SVGNS, "title");
    t.textContent = String(text);
    e.appendChild(t);
  }
  return e;
}
function seconds(iso) { return iso ? Date.parse(iso) / 1000 : null; }
// GET a JSON path of this daemon; throws with the path and the daemon's error when it is not 2xx.
async function getJSON(path) {
  const r = await fetch(path, {cache: "no-store"});
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(path + ": " + (body.error || "HTTP " + r.status));
  return body;
}
)JS";

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

}  // namespace

HttpResponse html_page(const std::string& title, const std::string& body, const std::string& script) {
  std::string doc = "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" + escape(title) +
                    "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n" + body + "\n<script>" + kKit + script +
                    "</script>\n</body>\n</html>\n";
  HttpResponse r{200, "text/html; charset=utf-8", std::move(doc), {}};
  // The page runs its own inline script and talks to this daemon only.
  r.headers = {{"Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"},
               {"X-Content-Type-Options", "nosniff"}};
  return r;
}

}  // namespace pto
