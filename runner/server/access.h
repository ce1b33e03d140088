#pragma once
// Access: who is calling (the one bearer-token check) and what each caller may do (the SPEC's permission
// table, in permits() and nowhere else). The API asks here before it hands a request to the host's commands.
//   admin    the admin token (a root-only file), or   everything
//            root over the Unix socket
//   submitter a uid in `submit-group` over the Unix   submit; cancel the runs it submitted; read (never a
//            socket (SO_PEERCRED), no sandbox user    sandbox user; never a card or a lease)
//   run      the run's own lease token (its steps)   leases of that run only (the commands face scopes them)
//   reader   the read token (read-token-file)          GET status, runs, logs, metrics, the page
//   anyone   nothing                                  the same, unless reads need a token (a `listen` off
//                                                     loopback; a foreground run's lease endpoints)
#include <sys/types.h>

#include <map>
#include <optional>
#include <set>
#include <string>

#include "server/http_server.h"
#include "util/ids.h"

namespace pto {

struct Caller {
  enum class Role { Anonymous, Reader, Admin, Run, Submitter };
  Role role = Role::Anonymous;
  int uid = -1;      // Role::Submitter: its uid (and who submitted the runs it may cancel)
  std::string user;  // and its name
  std::string run;  // Role::Run: the run whose token was shown
  std::optional<StepId> step;  // and the step, when it was one of its attempts' own token
  std::string peer;
  /// The run whose leases it may touch: "" for every lease (admin), else its own run's.
  const std::string& lease_scope() const { return run; }
};

enum class Action { Read, SubmitRun, CancelRun, ChangeCard, Lease, MuteTest, Bisect };

class Access {
 public:
  /// `reads_need_token`: GETs too need a token (any the caller may hold).
  explicit Access(bool reads_need_token = false) : reads_need_token_(reads_need_token) {}
  /// `file`: where it was read (the daemon says so at start and compares at a reload).
  void set_admin_token(std::string token, std::string file = "") {
    admin_token_ = std::move(token);
    admin_token_file_ = std::move(file);
  }
  const std::string& admin_token_file() const { return admin_token_file_; }
  void set_read_token(std::string token) { read_token_ = std::move(token); }
  void set_reads_need_token(bool need) { reads_need_token_ = need; }
  bool is_admin_token(const std::string& token) const { return token == admin_token_; }
  /// A run's lease token (PTO_RUNNER_LEASE_TOKEN of its steps); forgotten when the run ends.
  void add_run_token(const std::string& token, const std::string& run) { run_tokens_[token] = {run, std::nullopt}; }
  /// One step's own lease token: its leases end with it (forgotten when the step ends).
  void add_step_token(const std::string& token, const std::string& run, const StepId& step) { run_tokens_[token] = {run, step}; }
  void forget_token(const std::string& token) { run_tokens_.erase(token); }
  void forget_run(const std::string& run);

  Caller identify(const HttpRequest& req) const;
  /// `owner_uid`: for CancelRun, the uid that submitted the run (-1: not a local submitter's run).
  bool permits(const Caller& caller, Action action, int owner_uid = -1) const;
  /// What a refusal says for `action`, and its status: 401 (no or a wrong credential), 403 (a known caller
  /// that may not do this).
  std::string refusal(Action action) const;
  std::string refusal(const Caller& caller, Action action) const;
  int refusal_status(const Caller& caller) const { return caller.role == Caller::Role::Submitter ? 403 : 401; }
  /// `listen-unix` with `submit-group`: the uids in that group (its gid) may submit over the socket, except
  /// the sandbox users' uids (`never`), whatever their groups say.
  void set_local_submitters(gid_t group, std::set<uid_t> never) {
    submit_group_ = static_cast<long>(group);
    never_submit_ = std::move(never);
  }

 private:
  Caller identify_peer(const HttpRequest& req, Caller c) const;
  bool reads_need_token_;
  std::string admin_token_, admin_token_file_, read_token_;
  struct Scope {
    std::string run;
    std::optional<StepId> step;
  };
  std::map<std::string, Scope> run_tokens_;  // token -> the run (and step) it speaks for
  long submit_group_ = -1;                   // -1: no local submitters
  std::set<uid_t> never_submit_;
};

}  // namespace pto
