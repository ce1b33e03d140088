#pragma once
// GET /: the status page for a person (server/status_page.cpp).
#include "server/http_server.h"

namespace pto {

HttpResponse render_status_page();

}  // namespace pto
