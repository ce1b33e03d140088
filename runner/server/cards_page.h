#pragma once
// GET /cards: every card's last 24 h for a person (server/cards_page.cpp).
#include "server/http_server.h"

namespace pto {

HttpResponse render_cards_page();

}  // namespace pto
