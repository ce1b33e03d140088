#pragma once
// GET /tests: the test history for a person (server/tests_page.cpp).
#include "server/http_server.h"

namespace pto {

HttpResponse render_tests_page();

}  // namespace pto
