#include "exec/spawner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstring>
#include <vector>

#include "exec/cgroup_files.h"
#include "exec/child_reaper.h"
#include "exec/spawn_wire.h"
#include "util/process_env.h"
#include "util/clock.h"

namespace asio = boost::asio;

namespace pto {

namespace {
constexpr std::size_t kMaxRequest = 8 << 20;  // the spawner reads up to this (exec/spawner_main)
constexpr int kSendBuffer = 16 << 20;         // a request of kMaxRequest fits whole, with room for replies in flight
}  // namespace

struct Spawner::Impl : std::enable_shared_from_this<Spawner::Impl> {
  Impl(asio::io_context& io, int sock, pid_t pid) : io(io), socket(io, sock), pid(pid) {}
  asio::io_context& io;
  asio::posix::stream_descriptor socket;
  pid_t pid;
  bool gone = false;     // the spawner's end closed (or a send found it gone): nothing more is sent
  bool reading = false;
  std::uint64_t next_id = 0;
  struct Waiting {
    Done done;
    std::uint64_t token;  // owned_children::spawning()'s
  };
  std::map<std::uint64_t, Waiting> waiting;

  /// One reply, taken into account: the pid registered as an owned child before the orphan reaper can look
  /// again, or a child that never exec'd reaped here.
  static void settle(const SpawnReply& r, std::uint64_t token, pid_t& pid, int& error) {
    pid = r.pid;
    error = r.error;
    {
      std::lock_guard<std::mutex> g(owned_children::lock());
      if (pid > 0 && !error) owned_children::add(pid);
      owned_children::spawned(token);
    }
    if (pid > 0 && error) {
      ::waitpid(pid, nullptr, 0);  // it is exiting (its report came before its _exit)
      pid = -1;
    }
  }

  /// Answers are read while any is outstanding, also after a send found the spawner gone (what it answered
  /// before is still in the socket); nothing is armed while idle, so that io.run() may return.
  void read_replies() {
    if (reading || waiting.empty()) return;
    reading = true;
    // Weak: a handler already queued when ~Spawner closes the socket is not cancelled by the close.
    std::weak_ptr<Impl> weak = shared_from_this();
    socket.async_wait(asio::posix::stream_descriptor::wait_read, [weak](boost::system::error_code ec) {
      auto self = weak.lock();
      if (!self || ec == asio::error::operation_aborted) return;
      self->reading = false;
      for (;;) {
        SpawnReply r;
        ssize_t n = ::recv(self->socket.native_handle(), &r, sizeof r, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
        if (n != static_cast<ssize_t>(sizeof r)) return self->lost();
        auto it = self->waiting.find(r.id);
        if (it == self->waiting.end()) continue;
        Waiting w = std::move(it->second);
        self->waiting.erase(it);
        pid_t pid;
        int error;
        settle(r, w.token, pid, error);
        w.done(pid, error);
      }
      self->read_replies();
    });
  }

  /// The spawner ended: what it was asked and did not answer fails (EPIPE); later requests are refused.
  void lost() {
    gone = true;
    auto unanswered = std::move(waiting);
    waiting.clear();
    for (auto& [id, w] : unanswered) {
      {
        std::lock_guard<std::mutex> g(owned_children::lock());
        owned_children::spawned(w.token);
      }
      w.done(-1, EPIPE);
    }
  }

  /// Sends one request whole. The socket is non-blocking (asio made it so): while the spawner is behind and
  /// its socket full, this waits for room, at most 5 s. The errno, or 0.
  int send(std::string_view bytes, const std::vector<int>& fds) {
    const auto deadline = steady_now() + std::chrono::seconds(5);
    for (;;) {
      int error = send_message(socket.native_handle(), bytes, fds);
      if (error != EAGAIN) return error;
      if (steady_now() > deadline) return EAGAIN;
      pollfd p{socket.native_handle(), POLLOUT, 0};
      ::poll(&p, 1, 100);
    }
  }
};

Spawner::Spawner(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::string Spawner::default_program() {
  std::string exe = self_executable();
  return exe.substr(0, exe.rfind('/') + 1) + "pto-spawner";
}

std::unique_ptr<Spawner> Spawner::start(asio::io_context& io, const std::string& program, std::string& why) {
  if (::access(program.c_str(), X_OK) != 0) {
    why = program + ": " + std::strerror(errno);
    return nullptr;
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    why = std::string("socketpair: ") + std::strerror(errno);
    return nullptr;
  }
  // Root may go past wmem_max (SO_SNDBUFFORCE); anyone else gets what the host allows and sends less whole.
  // The spawner's end too: its answers (one small message each, ~1 KiB of buffer) must not block it while
  // the runner is still sending a burst of requests and not yet reading.
  for (int end : pair)
    if (::setsockopt(end, SOL_SOCKET, SO_SNDBUFFORCE, &kSendBuffer, sizeof kSendBuffer) != 0)
      ::setsockopt(end, SOL_SOCKET, SO_SNDBUF, &kSendBuffer, sizeof kSendBuffer);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pair[1], 3);
  posix_spawn_file_actions_addclosefrom_np(&fa, 4);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  // Its own process group: a terminal's Ctrl-C is the runner's to handle (it cancels its steps).
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  char* argv[] = {const_cast<char*>("pto-spawner"), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = -1;
  int error;
  {
    std::lock_guard<std::mutex> g(owned_children::lock());  // reaped by ~Spawner, not by the orphan reaper
    error = posix_spawn(&pid, program.c_str(), &fa, &attr, argv, envp);
    if (!error) owned_children::add(pid);
  }
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(pair[1]);
  if (error) {
    ::close(pair[0]);
    why = program + ": " + std::strerror(error);
    return nullptr;
  }
  return std::unique_ptr<Spawner>(new Spawner(std::make_shared<Impl>(io, pair[0], pid)));
}

Spawner::~Spawner() {
  const int sock = impl_->socket.native_handle();
  // Requests its owners no longer wait for: what was started is killed and reaped (their owners were
  // cancelled with the executor), for at most 2 s.
  auto deadline = steady_now() + std::chrono::seconds(2);
  while (!impl_->waiting.empty() && steady_now() < deadline) {
    pollfd p{sock, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    SpawnReply r;
    if (::recv(sock, &r, sizeof r, MSG_DONTWAIT) != static_cast<ssize_t>(sizeof r)) break;
    auto it = impl_->waiting.find(r.id);
    if (it == impl_->waiting.end()) continue;
    const std::uint64_t token = it->second.token;
    impl_->waiting.erase(it);
    pid_t pid;
    int error;
    Impl::settle(r, token, pid, error);
    if (pid > 0) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      owned_children::remove(pid);
    }
  }
  for (auto& [id, w] : impl_->waiting) {
    std::lock_guard<std::mutex> g(owned_children::lock());
    owned_children::spawned(w.token);
  }
  impl_->waiting.clear();
  impl_->socket.close();  // the spawner leaves at its end of the socket
  ::waitpid(impl_->pid, nullptr, 0);
  owned_children::remove(impl_->pid);
}

bool Spawner::alive() const { return !impl_->gone; }
pid_t Spawner::pid() const { return impl_->pid; }

bool Spawner::spawn(const SpawnSpec& spec, Done done) {
  if (impl_->gone) return false;
  SpawnRequest req;
  req.id = ++impl_->next_id;
  req.argv = spec.argv;
  req.env = spec.env;
  req.cwd = spec.cwd;
  req.has_out = spec.out_fd >= 0;
  req.has_cgroup = !spec.cgroup.empty();
  req.also_count = static_cast<std::uint32_t>(spec.also_join.size());
  if (spec.run_as) {
    req.drop = true;
    req.uid = spec.run_as->uid;
    req.gid = spec.run_as->gid;
    req.groups = spec.run_as->groups;
  }
  req.max_processes = spec.max_processes;
  const std::string bytes = encode_spawn_request(req);
  if (bytes.size() > kMaxRequest) return false;
  // The cgroup's directory and the limits' `tasks` through descriptors kept open (exec/cgroup_files):
  // the kernel gives the spawner its own copies with the message.
  std::vector<int> fds;
  if (req.has_out) fds.push_back(spec.out_fd);
  bool ok = true;
  if (req.has_cgroup) fds.push_back(cgroup_files::descriptor(spec.cgroup, O_RDONLY | O_DIRECTORY));
  for (const auto& dir : spec.also_join) fds.push_back(cgroup_files::descriptor(dir + "/tasks", O_WRONLY));
  for (int fd : fds) ok = ok && fd >= 0;
  int error = ok ? 0 : errno;
  if (!ok) {  // a cgroup that cannot be opened: as spawn_process would say
    asio::post(impl_->io, [done = std::move(done), error] { done(-1, error); });
    return true;
  }
  std::uint64_t token;
  {
    std::lock_guard<std::mutex> g(owned_children::lock());
    token = owned_children::spawning();  // children started from now on wait for this answer to be reaped
  }
  error = impl_->send(bytes, fds);
  if (error) {
    {
      std::lock_guard<std::mutex> g(owned_children::lock());
      owned_children::spawned(token);
    }
    // Not sent: this one is spawned in-process. The spawner is gone only when its end is (EPIPE and the
    // like); too large, out of memory or 5 s behind is this request's trouble alone.
    if (error == EPIPE || error == ECONNRESET || error == ENOTCONN) impl_->gone = true;
    return false;
  }
  impl_->waiting.emplace(req.id, Impl::Waiting{std::move(done), token});
  impl_->read_replies();
  return true;
}

}  // namespace pto
