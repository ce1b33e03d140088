#pragma once
// GET /perf: perf steps' series for a person (server/perf_page.cpp).
#include "server/http_server.h"

namespace pto {

HttpResponse render_perf_page();

}  // namespace pto
