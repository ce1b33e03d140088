#include "supervise/supervised_executor.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio.hpp>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "exec/launch_json.h"
#include "exec/process_sweep.h"
#include "supervise/supervisor.h"
#include "supervise/wire.h"
#include "util/secret_mask.h"
#include "util/clock.h"

extern char** environ;

namespace asio = boost::asio;
using nlohmann::json;

namespace pto {

namespace {

/// A blocking connect to the supervisor's socket: the descriptor, or -1.
int dial(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Starts `self supervise --dir DIR` in its own session, its output appended to DIR/supervisor.log.
std::string spawn_supervisor(const std::string& dir, const std::string& self, bool sweep) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  const std::string log = dir + "/supervisor.log";
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  // Nothing of the daemon's leaks into it (its listeners and clients' connections, which Asio opens without
  // close-on-exec: a copy here would keep a dead daemon's connections open and its address bound).
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  std::vector<std::string> args = {self, "supervise", "--dir", dir};
  if (sweep) args.push_back("--sweep");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, self.c_str(), &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? "" : std::string("cannot start ") + self + " supervise: " + std::strerror(rc);
}

}  // namespace

struct SupervisedExecutor::Impl {
  struct Step {
    std::string marker;
    std::function<void(const StepOutcome&)> done;
    std::shared_ptr<SecretMask> mask;
    std::function<bool(std::string_view)> take_line;  // its executor's line, handed back by the supervisor
  };

  Impl(asio::io_context& io, std::string dir, std::string self, bool sweep) : io(io), dir(std::move(dir)), self(std::move(self)), sweep(sweep) {}
  ~Impl() {
    if (conn) conn->close();
    for (auto& [marker, h] : held)
      close_fds(h.lock_fds);
    for (auto& [id, l] : leases)
      close_fds(l.lock_fds);
    for (auto& [name, fd] : given_listeners) ::close(fd);
  }

  asio::io_context& io;
  std::string dir, self;
  bool sweep = false;
  std::unique_ptr<asio::posix::stream_descriptor> conn;
  std::unique_ptr<WireReader> reader;
  std::map<std::uint64_t, Step> steps;          // started or adopted, not yet ended
  std::map<std::string, std::uint64_t> by_marker;
  std::map<std::string, HeldStep> held;         // found at connect, not yet adopted
  std::map<std::string, HeldLease> leases;      // found at connect, not yet taken
  json runs = json::object();
  std::vector<std::pair<std::string, int>> given_listeners;  // from the greeting, until taken
  std::vector<std::pair<std::string, int>> kept_listeners;   // ours (not owned), kept by the supervisor
  int pid = 0;
  std::uint64_t next = 0;

  /// Connects (starting the supervisor when none answers) and reads its greeting. "" or why not. A supervisor
  /// that is just leaving (it had nothing left) may take a connection and never greet it: tried again.
  std::string open() {
    std::string why;
    for (int attempt = 0; attempt < 3; ++attempt) {
      const int fd = dial_or_start(why);
      if (fd < 0) continue;
      std::vector<WireMessage> early;
      if (greet(fd, why, early)) {
        conn = std::make_unique<asio::posix::stream_descriptor>(io, fd);
        read();
        for (auto& m : early) on_message(m);  // came with the greeting's last bytes (a step's end, a line)
        return "";
      }
      for (auto& m : early)
        close_fds(m.fds);
      ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return why;
  }

  int dial_or_start(std::string& why) {
    const std::string path = supervisor_socket(dir);
    int fd = dial(path);
    // Started again every second while none answers: one that was leaving held the directory's lock, and the
    // one started meanwhile gave way to it.
    for (int i = 0; i < 250 && fd < 0; ++i) {
      if (i % 50 == 0)
        if (std::string e = spawn_supervisor(dir, self, sweep); !e.empty()) {
          why = e;
          return -1;
        }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      fd = dial(path);
    }
    if (fd < 0) why = "the step supervisor did not come up at " + path + " (see " + dir + "/supervisor.log)";
    return fd;
  }

  /// Its greeting, whole, before anything else: what it holds decides what this daemon adopts.
  bool greet(int fd, std::string& why, std::vector<WireMessage>& early) {
    const std::string path = supervisor_socket(dir);
    reader = std::make_unique<WireReader>();
    for (auto& [marker, h] : held)
      close_fds(h.lock_fds);
    for (auto& [id, l] : leases)
      close_fds(l.lock_fds);
    held.clear();
    leases.clear();
    for (auto& [name, fd] : given_listeners) ::close(fd);
    given_listeners.clear();
    const auto until = steady_now() + std::chrono::seconds(5);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (;;) {
      const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - steady_now()).count());
      pollfd p{fd, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, left) <= 0) {
        why = "the step supervisor at " + path + " did not greet";
        return false;
      }
      std::vector<WireMessage> got;
      const bool open = reader->read(fd, got);
      bool greeted = false;
      for (auto& m : got) {
        const std::string op = m.body.value("op", "");
        if (greeted) {
          early.push_back(std::move(m));
        } else if (op == "held") {
          HeldStep h;
          h.marker = m.body.value("id", "");
          h.run = m.body.value("run", "");
          h.lease_token = m.body.value("lease_token", "");
          h.ended = m.body.contains("outcome");
          if (h.ended) h.outcome = outcome_from_json(m.body["outcome"]);
          h.mask = m.body.value("mask", std::vector<std::string>{});
          h.lock_fds = std::move(m.fds);
          held[h.marker] = std::move(h);
        } else if (op == "lease") {
          leases[m.body.value("id", "")] = {m.body.value("data", json::object()), std::move(m.fds)};
        } else if (op == "listeners") {
          const auto names = m.body.value("names", std::vector<std::string>{});
          for (std::size_t i = 0; i < m.fds.size(); ++i) given_listeners.push_back({i < names.size() ? names[i] : "", m.fds[i]});
          m.fds.clear();
        } else if (op == "hello") {
          runs = m.body.value("runs", json::object());
          pid = m.body.value("pid", 0);
          greeted = true;
        } else {
          close_fds(m.fds);
        }
      }
      if (greeted) return true;
      if (!open) {
        why = "the step supervisor at " + path + " closed the connection";
        return false;
      }
    }
  }

  void read() {
    auto* c = conn.get();
    c->async_wait(asio::posix::stream_descriptor::wait_read, [this, c](boost::system::error_code ec) {
      if (conn.get() != c || ec == asio::error::operation_aborted) return;
      std::vector<WireMessage> got;
      const bool open = !ec && reader->read(c->native_handle(), got);
      for (auto& m : got) on_message(m);
      if (conn.get() != c) return;
      if (!open) return lost("the step supervisor closed its connection");
      read();
    });
  }

  void on_message(WireMessage& m) {
    close_fds(m.fds);
    if (m.body.value("op", "") == "line") {
      if (auto it = by_marker.find(m.body.value("id", "")); it != by_marker.end())
        if (auto s = steps.find(it->second); s != steps.end() && s->second.take_line) s->second.take_line(m.body.value("text", ""));
      return;
    }
    if (m.body.value("op", "") != "ended") return;
    const std::string marker = m.body.value("id", "");
    StepOutcome o = outcome_from_json(m.body.value("outcome", json::object()));
    auto it = by_marker.find(marker);
    if (it == by_marker.end()) {
      // A held step not adopted yet: its end waits for adopt() (or let_go_of_unadopted).
      if (auto h = held.find(marker); h != held.end()) {
        close_fds(h->second.lock_fds);  // the supervisor's copies are closed: ours hold nothing
        h->second.ended = true;
        h->second.outcome = o;
        h->second.mask = m.body.value("mask", std::vector<std::string>{});
      }
      return;
    }
    auto s = steps.find(it->second);
    if (s != steps.end() && s->second.mask) s->second.mask->add_values(m.body.value("mask", std::vector<std::string>{}));
    finish(it->second, o);
  }

  void finish(std::uint64_t handle, const StepOutcome& o) {
    auto s = steps.find(handle);
    if (s == steps.end()) return;
    Step step = std::move(s->second);
    steps.erase(s);
    by_marker.erase(step.marker);
    // The end is applied (and journaled by the engine) before the supervisor may forget it.
    step.done(o);
    send({{"op", "ack"}, {"id", step.marker}});
  }

  /// The supervisor is gone: every step it held ends (its processes swept by marker); a new one is started for
  /// the next step.
  void lost(const std::string& why) {
    spdlog::error("{}: {} step(s) it held end as failed", why, steps.size());
    conn.reset();
    // Ended on a later turn: this may be inside start(), whose caller has not got the handle yet.
    for (auto& [h, s] : steps) {
      kill_marked_processes(s.marker, SIGKILL);
      StepOutcome o;
      o.error = "its supervisor died (" + why + ")";
      asio::post(io, [done = std::move(s.done), o] { done(o); });
    }
    steps.clear();
    by_marker.clear();
  }

  bool send(json m, const std::vector<int>& fds = {}) {
    if (!conn) return false;
    if (std::string e = wire_send(conn->native_handle(), std::move(m), fds); !e.empty()) {
      lost("the step supervisor cannot be written to: " + e);
      return false;
    }
    return true;
  }
};

SupervisedExecutor::SupervisedExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SupervisedExecutor::~SupervisedExecutor() = default;

std::unique_ptr<SupervisedExecutor> SupervisedExecutor::connect(asio::io_context& io, const std::string& dir, const std::string& self_exe,
                                                               bool sweep, std::string& error) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ::chmod(dir.c_str(), 0700);  // nobody but root reaches its socket
  auto impl = std::make_unique<Impl>(io, dir, self_exe, sweep);
  error = impl->open();
  if (!error.empty()) return nullptr;
  return std::unique_ptr<SupervisedExecutor>(new SupervisedExecutor(std::move(impl)));
}

std::uint64_t SupervisedExecutor::start(StepLaunch launch, std::function<void(const StepOutcome&)> done) {
  Impl& d = *impl_;
  const std::uint64_t handle = ++d.next;
  if (!d.conn) {
    if (std::string e = d.open(); !e.empty()) {
      asio::post(d.io, [done, e] {
        StepOutcome o;
        o.error = e;
        done(o);
      });
      return handle;
    }
    // A connection made again mid-life: what the supervisor still held was ended as lost here already, and
    // its leases are still this daemon's (our copies of their flocks are not needed).
    let_go_of_unadopted();
    for (auto& [id, l] : d.leases)
      close_fds(l.lock_fds);
    d.leases.clear();
    for (auto& [name, fd] : d.given_listeners) ::close(fd);
    d.given_listeners.clear();
    if (!d.kept_listeners.empty()) keep_listeners(std::exchange(d.kept_listeners, {}));  // a new supervisor keeps them too
  }
  const std::string marker = launch.marker;
  d.steps[handle] = {marker, std::move(done), launch.mask, launch.take_prefix.empty() ? nullptr : launch.take_line};
  d.by_marker[marker] = handle;
  const std::string run = marker.substr(0, marker.find('/'));
  json m = {{"op", "start"}, {"id", marker}, {"run", run}, {"launch", launch_json(launch)}};
  if (!d.send(std::move(m), launch.hold_fds)) {
    // lost() ended it already (posted through finish): nothing more here.
  }
  return handle;
}

void SupervisedExecutor::cancel(std::uint64_t handle) {
  auto it = impl_->steps.find(handle);
  if (it != impl_->steps.end()) impl_->send({{"op", "cancel"}, {"id", it->second.marker}});
}

std::size_t SupervisedExecutor::active() const { return impl_->steps.size(); }

const std::map<std::string, HeldStep>& SupervisedExecutor::held() const { return impl_->held; }
const nlohmann::json& SupervisedExecutor::kept_runs() const { return impl_->runs; }
int SupervisedExecutor::supervisor_pid() const { return impl_->pid; }

std::uint64_t SupervisedExecutor::adopt(const std::string& marker, std::function<void(const StepOutcome&)> done, HeldStep& taken,
                                        std::shared_ptr<SecretMask> mask, std::function<bool(std::string_view)> take_line) {
  Impl& d = *impl_;
  auto h = d.held.find(marker);
  if (h == d.held.end()) return 0;
  taken = std::move(h->second);
  d.held.erase(h);
  const HeldStep& step = taken;
  const std::uint64_t handle = ++d.next;
  d.steps[handle] = {marker, std::move(done), mask, std::move(take_line)};
  d.by_marker[marker] = handle;
  if (step.ended && mask) mask->add_values(step.mask);
  if (step.ended) asio::post(d.io, [this, handle, o = step.outcome] { impl_->finish(handle, o); });
  return handle;
}

void SupervisedExecutor::let_go_of_unadopted() {
  Impl& d = *impl_;
  for (auto& [marker, h] : d.held) {
    close_fds(h.lock_fds);
    if (h.ended) {
      d.send({{"op", "ack"}, {"id", marker}});
      continue;
    }
    // Its run is not going on: it is stopped, and its end read and dropped when it comes.
    const std::uint64_t handle = ++d.next;
    d.steps[handle] = {marker, [](const StepOutcome&) {}, nullptr, nullptr};
    d.by_marker[marker] = handle;
    d.send({{"op", "cancel"}, {"id", marker}});
  }
  d.held.clear();
}

void SupervisedExecutor::keep_run(const std::string& run, const nlohmann::json& data) {
  impl_->send({{"op", "keep"}, {"run", run}, {"data", data}});
}

void SupervisedExecutor::keep_lease(const std::string& id, const nlohmann::json& data, const std::vector<int>& lock_fds) {
  impl_->send({{"op", "keep_lease"}, {"id", id}, {"data", data}}, lock_fds);
}

void SupervisedExecutor::forget_lease(const std::string& id) { impl_->send({{"op", "forget_lease"}, {"id", id}}); }

std::map<std::string, SupervisedExecutor::HeldLease> SupervisedExecutor::take_held_leases() { return std::exchange(impl_->leases, {}); }

void SupervisedExecutor::keep_listeners(std::vector<std::pair<std::string, int>> listeners) {
  std::vector<std::string> names;
  std::vector<int> fds;
  for (const auto& [name, fd] : listeners) names.push_back(name), fds.push_back(fd);
  impl_->kept_listeners = std::move(listeners);
  impl_->send({{"op", "keep_listeners"}, {"names", names}}, fds);
}

void SupervisedExecutor::forget_listeners() {
  impl_->kept_listeners.clear();
  impl_->send({{"op", "forget_listeners"}});
}

std::vector<std::pair<std::string, int>> SupervisedExecutor::take_listeners() { return std::exchange(impl_->given_listeners, {}); }

void SupervisedExecutor::forget_run(const std::string& run) { impl_->send({{"op", "forget"}, {"run", run}}); }

}  // namespace pto
