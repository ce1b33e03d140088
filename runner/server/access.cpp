#include "server/access.h"

#include <grp.h>
#include <pwd.h>

#include <vector>

#include <openssl/crypto.h>

namespace pto {

namespace {

// Constant time over the token's length; only the length can leak, and tokens are 16+ random characters.
bool same(const std::string& given, const std::string& token) {
  return !token.empty() && given.size() == token.size() && CRYPTO_memcmp(given.data(), token.data(), token.size()) == 0;
}

// Whether `uid` is a member of `group` (its primary group or a supplementary one), and its name.
bool in_group(uid_t uid, gid_t group, std::string& name) {
  std::vector<char> buf(16384);
  passwd pw{}, *found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || !found) return false;
  name = pw.pw_name;
  if (pw.pw_gid == group) return true;
  int n = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(n));
  if (::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<std::size_t>(n));
    if (::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) return false;
  }
  for (int i = 0; i < n; ++i)
    if (groups[static_cast<std::size_t>(i)] == group) return true;
  return false;
}

}  // namespace

void Access::forget_run(const std::string& run) {
  for (auto t = run_tokens_.begin(); t != run_tokens_.end();) t = t->second.run == run ? run_tokens_.erase(t) : std::next(t);
}

Caller Access::identify(const HttpRequest& req) const {
  Caller c;
  c.peer = req.peer;
  const std::string prefix = "Bearer ";
  if (req.authorization.compare(0, prefix.size(), prefix) != 0) return identify_peer(req, c);
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
  return identify_peer(req, c);
}

// Over the Unix socket, the kernel says who calls (SO_PEERCRED): root is the admin (it can read the token
// file anyway); a member of submit-group a local submitter, unless it is a sandbox user.
Caller Access::identify_peer(const HttpRequest& req, Caller c) const {
  if (req.peer_uid < 0) return c;
  const auto uid = static_cast<uid_t>(req.peer_uid);
  if (uid == 0) {
    c.role = Caller::Role::Admin;
    return c;
  }
  std::string name;
  if (submit_group_ >= 0 && !never_submit_.count(uid) && in_group(uid, static_cast<gid_t>(submit_group_), name)) {
    c.role = Caller::Role::Submitter;
    c.uid = req.peer_uid;
    c.user = name;
  }
  return c;
}

bool Access::permits(const Caller& c, Action action, int owner_uid) const {
  switch (action) {
    case Action::Read: return !reads_need_token_ || c.role != Caller::Role::Anonymous;
    case Action::SubmitRun: return c.role == Caller::Role::Admin || c.role == Caller::Role::Submitter;
    case Action::CancelRun: return c.role == Caller::Role::Admin || (c.role == Caller::Role::Submitter && owner_uid >= 0 && owner_uid == c.uid);
    case Action::ChangeCard:
    case Action::MuteTest:
    case Action::Bisect: return c.role == Caller::Role::Admin;
    case Action::Lease: return c.role == Caller::Role::Admin || c.role == Caller::Role::Run;
  }
  return false;
}

std::string Access::refusal(const Caller& caller, Action action) const {
  if (caller.role != Caller::Role::Submitter) return refusal(action);
  const std::string who = "uid " + std::to_string(caller.uid) + " (" + caller.user + ")";
  if (action == Action::CancelRun) return who + " is a local submitter: it may cancel the runs it submitted, and this one it did not";
  return who + " is a local submitter: it may submit runs, cancel its own and read; not " +
         (action == Action::ChangeCard ? "drain or return cards" : action == Action::MuteTest ? "mute tests"
          : action == Action::Bisect                                 ? "start or cancel bisections"
                                                                     : "lease cards");
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
