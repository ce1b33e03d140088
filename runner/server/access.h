#pragma once
// Access: who is calling (the one bearer-token check) and what each caller may do (the SPEC's permission
// table, in permits() and nowhere else). The API asks here before it hands a request to the host's commands.
//   admin    the admin token (a root-only file)      everything
//   run      the run's own lease token (its steps)   leases of that run only (the commands face scopes them)
//   reader   the read token (read-token-file)          GET status, runs, logs, metrics, the page
//   anyone   nothing                                  the same, unless reads need a token (a `listen` off
//                                                     loopback; a foreground run's lease endpoints)
#include <map>
#include <string>

#include "server/http_server.h"

namespace pto {

struct Caller {
  enum class Role { Anonymous, Reader, Admin, Run };
  Role role = Role::Anonymous;
  std::string run;  // Role::Run: the run whose token was shown
  std::string step;  // and the step, when it was that step's own token ("JOB-STEP")
  std::string peer;
  /// The run whose leases it may touch: "" for every lease (admin), else its own run's.
  const std::string& lease_scope() const { return run; }
};

enum class Action { Read, SubmitRun, CancelRun, ChangeCard, Lease };

class Access {
 public:
  /// `reads_need_token`: GETs too need a token (any the caller may hold).
  explicit Access(bool reads_need_token = false) : reads_need_token_(reads_need_token) {}
  void set_admin_token(std::string token) { admin_token_ = std::move(token); }
  void set_read_token(std::string token) { read_token_ = std::move(token); }
  void set_reads_need_token(bool need) { reads_need_token_ = need; }
  bool is_admin_token(const std::string& token) const { return token == admin_token_; }
  /// A run's lease token (PTO_RUNNER_LEASE_TOKEN of its steps); forgotten when the run ends.
  void add_run_token(const std::string& token, const std::string& run) { run_tokens_[token] = {run, ""}; }
  /// One step's own lease token: its leases end with it (forgotten when the step ends).
  void add_step_token(const std::string& token, const std::string& run, const std::string& step) { run_tokens_[token] = {run, step}; }
  void forget_token(const std::string& token) { run_tokens_.erase(token); }
  void forget_run(const std::string& run);

  Caller identify(const HttpRequest& req) const;
  bool permits(const Caller& caller, Action action) const;
  /// What a 401 says for `action`.
  std::string refusal(Action action) const;

 private:
  bool reads_need_token_;
  std::string admin_token_, read_token_;
  struct Scope {
    std::string run, step;
  };
  std::map<std::string, Scope> run_tokens_;  // token -> the run (and step) it speaks for
};

}  // namespace pto
