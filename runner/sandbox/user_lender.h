#pragma once
// UserLender: what a host's runs need of the sandbox users (SPEC "A step cannot touch the daemon, the host or
// another run"): one user lent to each run alone, given back once its run has ended. SandboxPool is the real
// one (sandbox/sandbox_pool); the hosting tests lend with a fake.
#include <functional>
#include <optional>
#include <string>

#include "exec/run_as.h"

namespace pto {

class UserLender {
 public:
  virtual ~UserLender() = default;
  /// False: there are no users to lend (said why by why()); steps run as the host's own user.
  virtual bool active() const = 0;
  virtual const std::string& why() const = 0;
  /// A free user for `run` (the same one again for the same run), or nothing when all are lent.
  virtual std::optional<RunAs> lend(const std::string& run) = 0;
  /// User `name` for `run` again (a run taken over from an earlier daemon keeps its user), or nothing when it
  /// is not one of the users or is lent to another run.
  virtual std::optional<RunAs> lend_again(const std::string& run, const std::string& name) { (void)name; return lend(run); }
  /// The user `run` had goes back: nothing of it may run or stay behind. What was swept ("" nothing).
  virtual std::string give_back(const std::string& run) = 0;
  /// The sweep give_back would make of `run`'s user (what still runs as it killed, what it left removed), for
  /// the caller to run first on any thread: it reads all of /proc and every world-writable directory, too long
  /// for the engine's thread. It says what it swept ("" nothing); give_back(run) then sweeps no more. Null
  /// when there is nothing to sweep.
  virtual std::function<std::string()> leftovers_sweep(const std::string& run) { (void)run; return nullptr; }
};

}  // namespace pto
