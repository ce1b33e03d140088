#pragma once
// GET /bisections/{id}: one bisection for a person (server/bisection_page.cpp).
#include "server/http_server.h"

namespace pto {

HttpResponse render_bisection_page();

}  // namespace pto
