#include "server/access.h"

#include <openssl/crypto.h>

namespace pto {

namespace {

// Constant time over the token's length; only the length can leak, and tokens are 16+ random characters.
bool same(const std::string& given, const std::string& token) {
  return !token.empty() && given.size() == token.size() && CRYPTO_memcmp(given.data(), token.data(), token.size()) == 0;
}

}  // namespace

void Access::forget_run(const std::string& run) {
  for (auto t = run_tokens_.begin(); t != run_tokens_.end();) t = t->second.run == run ? run_tokens_.erase(t) : std::next(t);
}

Caller Access::identify(const HttpRequest& req) const {
  Caller c;
  c.peer = req.peer;
  const std::string prefix = "Bearer ";
  if (req.authorization.compare(0, prefix.size(), prefix) != 0) return c;
  const std::string given = req.authorization.substr(prefix.size());
  if (same(given, admin_token_)) {
    c.role = Caller::Role::Admin;
    return c;
  }
  if (same(given, read_token_)) {
    c.role = Caller::Role::Reader;
    return c;
  }
  // A map lookup would not be constant-time in the token's value; the tokens of active steps are few.
  for (const auto& [token, scope] : run_tokens_)
    if (same(given, token)) {
      c.role = Caller::Role::Run;
      c.run = scope.run;
      c.step = scope.step;
      return c;
    }
  return c;
}

bool Access::permits(const Caller& c, Action action) const {
  switch (action) {
    case Action::Read: return !reads_need_token_ || c.role != Caller::Role::Anonymous;
    case Action::SubmitRun:
    case Action::CancelRun:
    case Action::ChangeCard: return c.role == Caller::Role::Admin;
    case Action::Lease: return c.role == Caller::Role::Admin || c.role == Caller::Role::Run;
  }
  return false;
}

std::string Access::refusal(Action action) const {
  if (action == Action::Read && !admin_token_.empty())
    return "reads need a token here (the daemon listens beyond loopback): Authorization: Bearer <the read-token-file's or the admin token>";
  if (action == Action::Lease || (action == Action::Read && admin_token_.empty()))
    return admin_token_.empty() ? "missing or wrong bearer token ($PTO_RUNNER_LEASE_TOKEN in a step of this run)"
                                : "missing or wrong bearer token (the admin token, or $PTO_RUNNER_LEASE_TOKEN in a step)";
  return "missing or wrong bearer token (Authorization: Bearer <token from the token file>)";
}

}  // namespace pto
