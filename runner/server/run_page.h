#pragma once
// GET /runs/{id}: a run's page for a person (server/run_page.cpp).
#include "server/http_server.h"

namespace pto {

HttpResponse render_run_page();

}  // namespace pto
