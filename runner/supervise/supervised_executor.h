#pragma once
// SupervisedExecutor: the daemon's executor when its steps are held by the host's supervisor
// (supervise/supervisor.h). It sends each launch to the supervisor with the step's card flocks, and hears each
// step's end; it never forks, so the engine's thread never waits on a child getting a CPU (bench/README,
// issue 31's dispatch figure). After a restart, the steps the supervisor still holds are found again by their
// markers (adopt) and the runs' kept data read back (kept_runs).
//
// The supervisor is started (`<self> supervise --dir DIR`, in its own session) when none answers. If it dies,
// every step it held ends with an error (its processes are swept by marker) and the next start makes a new one.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/executor.h"

namespace boost::asio {
class io_context;
}

namespace pto {

class SecretMask;

/// A step the supervisor held when this daemon connected: its run, and its end when it ended meanwhile; the
/// descriptors of its cards' flocks while it still runs (the daemon's pool takes them: host/dispatcher adopt).
struct HeldStep {
  std::string marker, run;
  std::string lease_token;  // the attempt's own, for its leases (hosting/hosted_run)
  bool ended = false;
  StepOutcome outcome;
  std::vector<std::string> mask;  // an ended step's masks (what it added itself among them)
  std::vector<int> lock_fds;
};

class SupervisedExecutor : public Executor {
 public:
  /// Connects to (or starts) the supervisor of `dir` with `self_exe` (`sweep`: it uses no cgroups, runner.yml
  /// containment: sweep); `error` says why not (then null).
  static std::unique_ptr<SupervisedExecutor> connect(boost::asio::io_context& io, const std::string& dir, const std::string& self_exe,
                                                     bool sweep, std::string& error);
  ~SupervisedExecutor() override;

  std::uint64_t start(StepLaunch launch, std::function<void(const StepOutcome&)> done) override;
  void cancel(std::uint64_t handle) override;
  std::size_t active() const override;

  /// What the supervisor held when this daemon connected (by marker), until adopted or let go.
  const std::map<std::string, HeldStep>& held() const;
  /// What runs kept with the supervisor (run id -> data), as it was when this daemon connected.
  const nlohmann::json& kept_runs() const;
  /// Takes over a held step: `done` is called once it ends (on a later turn, if it already has). 0 when the
  /// supervisor holds no step `marker`. What was held of it goes to `taken`: the descriptors of its cards'
  /// flocks (a running step's) are the caller's to keep or close.
  /// `mask`: its run's masks, which learn what the step masked itself (::add-mask::) when it ends.
  std::uint64_t adopt(const std::string& marker, std::function<void(const StepOutcome&)> done, HeldStep& taken,
                      std::shared_ptr<SecretMask> mask, std::function<bool(std::string_view)> take_line = nullptr);
  /// Held steps nobody adopted (their runs are not going on): killed, and their ends read and dropped.
  void let_go_of_unadopted();
  /// A run's data the next daemon needs and that must not be written to disk (its environment, its secrets):
  /// kept in the supervisor's memory until forget_run.
  void keep_run(const std::string& run, const nlohmann::json& data);
  void forget_run(const std::string& run);
  /// A granted lease (lease/lease_state_json) and its cards' flocks, kept past this daemon; forgotten at its end.
  void keep_lease(const std::string& id, const nlohmann::json& data, const std::vector<int>& lock_fds);
  void forget_lease(const std::string& id);
  /// The leases the supervisor kept when this daemon connected: their data and flocks (the caller's to keep
  /// or close), taken once.
  struct HeldLease {
    nlohmann::json data;
    std::vector<int> lock_fds;
  };
  std::map<std::string, HeldLease> take_held_leases();
  /// The daemon's listening sockets by name (still the caller's), copies kept by the supervisor while this
  /// daemon is away so that nothing else binds its address (server/inherited_listeners); again after a new
  /// supervisor was started. forget_listeners: a daemon stopping for good lets its address go.
  void keep_listeners(std::vector<std::pair<std::string, int>> listeners);
  void forget_listeners();
  /// The listening sockets the supervisor kept of the last daemon (name, descriptor: the caller's), taken once.
  std::vector<std::pair<std::string, int>> take_listeners();
  /// The supervisor's pid (for the status and the tests).
  int supervisor_pid() const;

  struct Impl;

 private:
  explicit SupervisedExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pto
