#include "supervise/supervisor.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio.hpp>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include <spdlog/spdlog.h>

#include "exec/child_reaper.h"
#include "exec/executor.h"
#include "exec/launch_json.h"
#include "supervise/wire.h"
#include "util/secret_mask.h"

namespace asio = boost::asio;
using nlohmann::json;

namespace pto {

std::string supervisor_dir(const std::string& state_dir) { return state_dir + "/supervisor"; }
std::string supervisor_socket(const std::string& dir) { return dir + "/sock"; }

namespace {

class Supervisor {
 public:
  Supervisor(asio::io_context& io, std::string dir)
      : io_(io), dir_(std::move(dir)), acceptor_(io), linger_(io), reaper_(io), executor_(make_local_executor(io)) {}

  std::string listen() {
    const std::string path = supervisor_socket(dir_);
    ::unlink(path.c_str());
    boost::system::error_code ec;
    acceptor_.open(asio::local::stream_protocol(), ec);
    if (!ec) acceptor_.bind(asio::local::stream_protocol::endpoint(path), ec);
    if (!ec) acceptor_.listen(8, ec);
    if (ec) return path + ": " + ec.message();
    ::chmod(path.c_str(), 0600);
    accept();
    return "";
  }

 private:
  struct Held {
    std::uint64_t handle = 0;
    std::string run;
    std::vector<int> fds;  // its cards' flocks, while it runs
    std::shared_ptr<SecretMask> mask;
    std::string lease_token;  // its PTO_RUNNER_LEASE_TOKEN: the next daemon accepts it again for its leases
    std::optional<StepOutcome> ended;
  };

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, asio::local::stream_protocol::socket s) {
      if (ec) return;
      // A newer daemon replaces an older one; whatever the older one had not read is told again.
      conn_ = std::make_unique<asio::local::stream_protocol::socket>(std::move(s));
      conn_->non_blocking(true);
      reader_ = std::make_unique<WireReader>();
      ++generation_;
      linger_.cancel();
      greet();
      if (conn_) read();  // a daemon gone already (the greeting could not be sent): the next one is awaited
      accept();
    });
  }

  void greet() {
    for (auto& [id, h] : held_) {
      json m = {{"op", "held"}, {"id", id}, {"run", h.run}, {"lease_token", h.lease_token}};
      if (h.ended) m["outcome"] = outcome_json(*h.ended), m["mask"] = h.mask ? h.mask->values() : std::vector<std::string>{};
      send(std::move(m), h.ended ? std::vector<int>{} : h.fds);
    }
    for (auto& [id, l] : leases_) send({{"op", "lease"}, {"id", id}, {"data", l.data}}, l.fds);
    if (!listeners_.fds.empty()) send({{"op", "listeners"}, {"names", listeners_.data}}, listeners_.fds);
    send({{"op", "hello"}, {"pid", ::getpid()}, {"runs", runs_}});
  }

  void send(json m, const std::vector<int>& fds = {}) {
    if (!conn_) return;
    if (std::string e = wire_send(conn_->native_handle(), std::move(m), fds); !e.empty()) drop_connection();
  }

  void read() {
    // The connection's generation, not its address: a replacement may be allocated where the old one was.
    const std::uint64_t gen = generation_;
    conn_->async_wait(asio::socket_base::wait_read, [this, gen](boost::system::error_code ec) {
      if (gen != generation_ || !conn_) return;  // replaced or dropped meanwhile
      std::vector<WireMessage> got;
      const bool open = !ec && reader_->read(conn_->native_handle(), got);
      for (auto& m : got) {
        if (gen != generation_) {  // what a replaced connection still had buffered is not acted on
          close_fds(m.fds);
          continue;
        }
        handle(m);
      }
      if (gen != generation_ || !conn_) return;
      if (!open) return drop_connection();
      read();
    });
  }

  void drop_connection() {
    ++generation_;
    conn_.reset();
    reader_.reset();
    maybe_exit();
  }

  void handle(WireMessage& m) {
    const std::string op = m.body.value("op", "");
    const std::string id = m.body.value("id", "");
    if (op == "start") return start(id, m);
    if (op == "keep_lease") {
      // A granted lease's cards: their flocks kept while its command (the client's, not ours) runs on.
      Kept& k = leases_[id];
      close_fds(k.fds);
      k.data = m.body.value("data", json::object());
      k.fds = std::move(m.fds);
      return;
    }
    if (op == "keep_listeners") {
      // The daemon's listening sockets: while it is away (a restart, a crash) they stay bound here, so nothing
      // else can take its address; the next daemon gets them in its greeting.
      close_fds(listeners_.fds);
      listeners_.data = m.body.value("names", json::array());
      listeners_.fds = std::move(m.fds);
      return;
    }
    close_fds(m.fds);  // only a start, a lease's and the listeners carry descriptors
    if (op == "forget_listeners") {  // a daemon that stops for good: its address is free again when it exits
      close_fds(listeners_.fds);
      listeners_.data = json::array();
      return;
    }
    if (op == "cancel") {
      if (auto it = held_.find(id); it != held_.end() && !it->second.ended) executor_->cancel(it->second.handle);
    } else if (op == "ack") {
      if (auto it = held_.find(id); it != held_.end() && it->second.ended) held_.erase(it);
      maybe_exit();
    } else if (op == "keep") {
      runs_[m.body.value("run", "")] = m.body.value("data", json::object());
    } else if (op == "forget_lease") {
      if (auto it = leases_.find(id); it != leases_.end()) {
        close_fds(it->second.fds);
        leases_.erase(it);
      }
      maybe_exit();
    } else if (op == "forget") {
      runs_.erase(m.body.value("run", ""));
      maybe_exit();
    }
  }

  void start(const std::string& id, WireMessage& m) {
    if (id.empty() || held_.count(id)) {
      close_fds(m.fds);
      StepOutcome o;
      o.error = id.empty() ? "a step with no marker" : "step " + id + " is already held";
      return send({{"op", "ended"}, {"id", id}, {"outcome", outcome_json(o)}, {"refused", true}});
    }
    StepLaunch l = launch_from_json(m.body.value("launch", json::object()));
    if (!l.take_prefix.empty())  // its executor's line (Slurm's placement): to the daemon, not the log
      l.take_line = [this, id, prefix = l.take_prefix](std::string_view line) {
        if (line.substr(0, prefix.size()) != prefix) return false;
        send({{"op", "line"}, {"id", id}, {"text", std::string(line)}});
        return true;
      };
    Held& h = held_[id];
    h.run = m.body.value("run", "");
    h.fds = std::move(m.fds);
    h.mask = l.mask;
    for (const std::string& e : l.env)
      if (e.rfind("PTO_RUNNER_LEASE_TOKEN=", 0) == 0) h.lease_token = e.substr(23);
    h.handle = executor_->start(std::move(l), [this, id](const StepOutcome& o) { ended(id, o); });
  }

  void ended(const std::string& id, const StepOutcome& o) {
    auto it = held_.find(id);
    if (it == held_.end()) return;
    Held& h = it->second;
    h.ended = o;
    // Every process of it is gone: its cards are free. The daemon releases them when it reads this, and its
    // next step may lock them at once, so our copies of the flocks go first.
    close_fds(h.fds);
    send({{"op", "ended"}, {"id", id}, {"outcome", outcome_json(o)}, {"mask", h.mask ? h.mask->values() : std::vector<std::string>{}}});
    maybe_exit();
  }

  void maybe_exit() {
    if (conn_) return;
    bool running = !leases_.empty();  // a lease's cards are held for its command until the next daemon
    for (const auto& [id, h] : held_) running = running || !h.ended;
    if (running) return;
    if (held_.empty() && runs_.empty()) return leave();
    // Only ends (and runs' data) no daemon has read: kept a while for the next daemon, then given up.
    linger_.expires_after(std::chrono::seconds(static_cast<int>(kSupervisorLingerSeconds)));
    linger_.async_wait([this](boost::system::error_code ec) {
      if (!ec && !conn_) leave();
    });
  }

  /// No new daemon may connect from here on (one that dials now fails at once and starts a new supervisor).
  void leave() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    ::unlink(supervisor_socket(dir_).c_str());
    io_.stop();
  }

  asio::io_context& io_;
  std::string dir_;
  asio::local::stream_protocol::acceptor acceptor_;
  asio::steady_timer linger_;
  OrphanReaper reaper_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<asio::local::stream_protocol::socket> conn_;
  std::unique_ptr<WireReader> reader_;
  std::uint64_t generation_ = 0;  // of the connection: a new one or a drop makes the old one's reads void
  std::map<std::string, Held> held_;  // by the step's marker
  struct Kept {
    json data;
    std::vector<int> fds;
  };
  std::map<std::string, Kept> leases_;  // granted leases by id: their data and their cards' flocks
  Kept listeners_;  // the daemon's listening sockets (data: their names), kept while it is away
  json runs_ = json::object();        // run id -> what its daemon keeps here
};

}  // namespace

int run_supervisor(const std::string& dir) {
  ::umask(077);
  std::error_code fec;
  std::filesystem::create_directories(dir, fec);
  ::chmod(dir.c_str(), 0700);
  // One supervisor per directory: the lock is held for the process's life.
  const std::string lock_path = dir + "/supervisor.lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) {
    spdlog::error("supervisor: {}: {}", lock_path, std::strerror(errno));
    return 1;
  }
  if (::flock(lock, LOCK_EX | LOCK_NB) != 0) return 0;  // another one holds this directory's steps
  // Not the daemon's terminal, signals or process group: a Ctrl-C or a unit's stop of the daemon is not ours.
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGHUP, SIG_IGN);
  std::signal(SIGPIPE, SIG_IGN);
  asio::io_context io;
  Supervisor s(io, dir);
  if (std::string e = s.listen(); !e.empty()) {
    spdlog::error("supervisor: cannot listen on {}", e);
    return 1;
  }
  io.run();
  ::unlink(supervisor_socket(dir).c_str());
  return 0;
}

}  // namespace pto
