#pragma once
// What every page of the daemon shares (GET /, /runs/{id}, /cards): one self-contained HTML document each, no
// asset from outside the daemon, the same style, and the same small script kit. Every text from a definition
// or a request goes in through textContent (el(), svg() set no HTML), never as markup; links are only the
// daemon's own paths or the http(s) URLs the server checked (link()).
#include <string>

#include "server/http_server.h"

namespace pto {

/// A page: `title`, `body` (static HTML of the page's own), `script` (its code, after the kit's helpers).
/// Served with a Content-Security-Policy allowing its inline script and style only, talking to this daemon.
HttpResponse html_page(const std::string& title, const std::string& body, const std::string& script);

}  // namespace pto
