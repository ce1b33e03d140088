#pragma once
// Orphans of steps, reaped. The daemon (and `run`) is a child subreaper (PR_SET_CHILD_SUBREAPER): what a step
// leaves running when its shell exits is reparented to pto-runner instead of PID 1 (which, in a container, may
// never reap), killed with the step's cgroup or by the sweep, and reaped here, so no step leaves a zombie.
//
// The processes pto-runner starts itself are waited for by their owners (the executor, through Boost.Process):
// they are registered while spawning, under the lock the reaper also takes, and the reaper never waits for a
// registered pid, so no owner loses its child's exit status. A step the spawner process starts (exec/spawner)
// is this process's child before its pid comes back: while such an answer is outstanding the reaper leaves
// every child started since the oldest one was asked for (by its start time in /proc) to the next pass.
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>

namespace boost::asio {
class io_context;
}

namespace pto {

namespace owned_children {
/// Held while spawning and registering (so the reaper never sees an unregistered child of ours).
std::mutex& lock();
void add(pid_t pid);     // with lock() held
void remove(pid_t pid);  // once its owner has waited for it
/// With lock() held: a child may exist from now on whose pid is not known yet (the spawner's answer is
/// outstanding). The token is for spawned(), once that answer is in (its pid added, if any).
std::uint64_t spawning();
void spawned(std::uint64_t token);
}  // namespace owned_children

/// Reaps every child that is not registered and has exited; returns how many.
int reap_orphans();

class OrphanReaper {
 public:
  /// Makes this process a subreaper and reaps orphans every second on `io`.
  explicit OrphanReaper(boost::asio::io_context& io);
  ~OrphanReaper();
  /// Stops the periodic reaping (so the io_context can run out of work) after one last pass.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pto
