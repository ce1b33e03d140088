#pragma once
// The runner's side of its spawner process (exec/spawner_main: `pto-spawner`, beside the runner's binary).
// A step is asked for and the runner goes on; its pid comes back on the io_context once the child has exec'd,
// a child of this process (CLONE_PARENT) like one spawn_process made. Why: the runner's own `vfork` waited for
// every child to get a CPU and exec (bench/README.md, "The spawner").
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "exec/spawn_process.h"

namespace boost::asio {
class io_context;
}

namespace pto {

class Spawner {
 public:
  /// `pid` the child's (an owned child, registered with exec/child_reaper), or -1 with `error` an errno when
  /// nothing was started (EPIPE: the spawner went away with the request; its child, if any, is not known).
  using Done = std::function<void(pid_t pid, int error)>;

  /// Starts the spawner `program`; nullptr with `why` when it cannot (the caller spawns in-process).
  static std::unique_ptr<Spawner> start(boost::asio::io_context& io, const std::string& program, std::string& why);
  /// `pto-spawner` beside this process's executable.
  static std::string default_program();
  /// Kills what it started for requests still unanswered (their owners are gone) and ends the spawner.
  ~Spawner();

  /// Asks for `spec` (spec.fork_into_cgroup is implied). False when it was not sent (the spawner is gone, or
  /// the request is larger than one message): the caller spawns in-process. `done` is never called inline.
  bool spawn(const SpawnSpec& spec, Done done);
  bool alive() const;
  pid_t pid() const;

  struct Impl;

 private:
  explicit Spawner(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;  // shared with its pending read's handler (weakly)
};

}  // namespace pto
