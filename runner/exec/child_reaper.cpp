#include "exec/child_reaper.h"

#include <dirent.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fstream>
#include <set>

namespace pto {

namespace {
std::set<pid_t>& registry() {
  static std::set<pid_t> pids;
  return pids;
}
int unanswered = 0;  // spawns whose pid is not known yet (exec/spawner)
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
void spawning() { ++unanswered; }
void spawned() { --unanswered; }
}  // namespace owned_children

int reap_orphans() {
  std::lock_guard<std::mutex> g(owned_children::lock());
  if (unanswered > 0) return 0;
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
