#include "exec/child_reaper.h"
#include "util/clock.h"

#include <dirent.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace pto {

namespace {
std::set<pid_t>& registry() {
  static std::set<pid_t> pids;
  return pids;
}
// When each spawn whose pid is not known yet was asked for (exec/spawner), in clock ticks since boot: the
// clock of a process's start time in /proc/<pid>/stat.
std::multiset<std::uint64_t>& unanswered() {
  static std::multiset<std::uint64_t> asked;
  return asked;
}

/// A process's start time (field 22 of /proc/<pid>/stat, ticks since boot); 0 when it cannot be read.
std::uint64_t start_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 1));
  std::string f;
  for (int i = 3; i <= 22 && fields >> f; ++i)
    if (i == 22) return std::strtoull(f.c_str(), nullptr, 10);
  return 0;
}
}  // namespace

namespace owned_children {
std::mutex& lock() {
  static std::mutex m;
  return m;
}
void add(pid_t pid) { registry().insert(pid); }
void remove(pid_t pid) {
  std::lock_guard<std::mutex> g(lock());
  registry().erase(pid);
}
std::uint64_t spawning() {
  const std::uint64_t now = boot_ticks_now();
  unanswered().insert(now);
  return now;
}
void spawned(std::uint64_t token) {
  auto it = unanswered().find(token);
  if (it != unanswered().end()) unanswered().erase(it);
}
}  // namespace owned_children

int reap_orphans() {
  std::lock_guard<std::mutex> g(owned_children::lock());
  // A child started since the oldest outstanding spawn may be that spawn's step: left to a later pass (one
  // tick of slack for the clocks' rounding).
  const std::uint64_t oldest = unanswered().empty() ? 0 : *unanswered().begin();
  int reaped = 0;
  // Our children, from every thread's list (a child belongs to the thread that made it).
  DIR* tasks = ::opendir("/proc/self/task");
  if (!tasks) return 0;
  std::set<pid_t> children;
  while (dirent* t = ::readdir(tasks)) {
    if (t->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + t->d_name + "/children");
    for (pid_t p; in >> p;) children.insert(p);
  }
  ::closedir(tasks);
  for (pid_t p : children) {
    if (registry().count(p)) continue;
    if (oldest && start_ticks(p) + 1 >= oldest) continue;
    int status = 0;
    if (::waitpid(p, &status, WNOHANG) == p) ++reaped;
  }
  return reaped;
}

struct OrphanReaper::Impl {
  explicit Impl(boost::asio::io_context& io) : timer(io) {}
  boost::asio::steady_timer timer;
  // cancel() does not reach a wait that has already expired and whose handler is queued: that handler would
  // re-arm the timer and the io_context would never run out of work (`run` hung after its summary).
  bool stopped = false;
  void arm() {
    timer.expires_after(std::chrono::seconds(1));
    timer.async_wait([this](boost::system::error_code ec) {
      if (ec || stopped) return;
      reap_orphans();
      arm();
    });
  }
};

OrphanReaper::OrphanReaper(boost::asio::io_context& io) : impl_(std::make_unique<Impl>(io)) {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  impl_->arm();
}

OrphanReaper::~OrphanReaper() { stop(); }

void OrphanReaper::stop() {
  impl_->stopped = true;
  impl_->timer.cancel();
  reap_orphans();
}

}  // namespace pto
