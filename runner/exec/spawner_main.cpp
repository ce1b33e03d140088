// pto-spawner: the small process that starts a runner's steps (exec/spawner is the runner's side).
//
// Why a process of its own: started from the runner, a step's `vfork` held the runner's thread until the
// child exec'd, and on a busy host the child waits for a CPU first, so the runner dispatched one step per
// child's wait (bench/README.md, "The spawner"). Forking the runner instead copies its page tables (2.4 s for
// 1,000 steps). This program is static and single-threaded, with a few pages of its own: it forks (fork
// semantics, not vfork: it does not wait for the exec either) with CLONE_PARENT, so every step is still the
// runner's own child (its exit status, its pidfd, the subreaper's reaping are the runner's as before), and
// with CLONE_INTO_CGROUP, so it is in its cgroup from its first instruction without a migration.
//
// Its socket (fd 3, SOCK_SEQPACKET, made by the runner with socketpair) is its only input: one request per
// message (exec/spawn_wire), answered once the child has exec'd (or failed, with the errno) through a
// close-on-exec pipe it watches. It leaves when the runner's end closes. It runs as the runner's user (root
// for sandboxed steps): the child drops to the run's user itself (exec/spawn_process become_step).
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "exec/spawn_process.h"
#include "exec/spawn_wire.h"

namespace {

constexpr int kSocket = 3;
constexpr std::size_t kMaxRequest = 8 << 20;  // exec/spawner sends nothing longer
char request_buf[kMaxRequest];

struct Started {
  int report;  // read end of the child's close-on-exec pipe: EOF once it exec'd, an errno if it failed
  std::uint64_t id;
  pid_t pid;
};

void reply(std::uint64_t id, pid_t pid, int error) {
  pto::SpawnReply r{id, pid, error};
  if (::send(kSocket, &r, sizeof r, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof r)) ::_exit(0);  // the runner is gone
}

void close_all(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}

/// Clones the child for `req` (its descriptors in `fds`); its pid, or -1 with errno.
pid_t launch(const pto::SpawnRequest& req, const std::vector<int>& fds, int null_fd, int report_write) {
  std::size_t at = 0;
  const int out_fd = req.has_out ? fds[at++] : -1;
  const int cgroup_fd = req.has_cgroup ? fds[at++] : -1;
  std::vector<char*> argv = pto::exec_strings(req.argv), envp = pto::exec_strings(req.env);
  pto::StepChild c;
  c.argv = argv.data();
  c.envp = envp.data();
  c.cwd = req.cwd.c_str();
  c.out_fd = out_fd;
  c.null_fd = null_fd;
  c.also_fds = fds.data() + at;
  c.also_count = req.also_count;
  c.drop = req.drop;
  c.uid = req.uid;
  c.gid = req.gid;
  c.groups = req.groups.data();
  c.group_count = req.groups.size();
  c.max_processes = req.max_processes;
  clone_args args{};
  args.flags = CLONE_PARENT | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0);
  args.exit_signal = 0;  // must be 0 with CLONE_PARENT: the child gets this process's own (SIGCHLD)
  args.cgroup = static_cast<std::uint64_t>(cgroup_fd >= 0 ? cgroup_fd : 0);
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0 && cgroup_fd >= 0 && (errno == EINVAL || errno == E2BIG)) {
    // A kernel without CLONE_INTO_CGROUP (before 5.7): the child writes its pid into cgroup.procs instead.
    c.procs_fd = ::openat(cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (c.procs_fd < 0) return -1;
    args.flags = CLONE_PARENT;
    args.cgroup = 0;
    pid = ::syscall(SYS_clone3, &args, sizeof args);
  }
  if (pid == 0) {
    int error = pto::become_step(c);
    ssize_t ignored = ::write(report_write, &error, sizeof error);
    (void)ignored;
    ::_exit(127);
  }
  const int saved = errno;
  if (c.procs_fd >= 0) ::close(c.procs_fd);
  errno = saved;
  return static_cast<pid_t>(pid);
}

}  // namespace

int main() {
  struct stat st {};
  if (::fstat(kSocket, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    std::fprintf(stderr, "pto-spawner: started by pto-runner only (its socket on descriptor 3)\n");
    return 2;
  }
  ::fcntl(kSocket, F_SETFD, FD_CLOEXEC);  // never a step's
  // Terminal signals are the runner's to act on; this process leaves when the runner's end closes.
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::vector<Started> started;
  std::vector<pollfd> polled;
  std::vector<int> fds;
  for (;;) {
    polled.assign(1, pollfd{kSocket, POLLIN, 0});
    for (const auto& s : started) polled.push_back(pollfd{s.report, POLLIN, 0});
    if (::poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    // Children that exec'd or failed, answered in turn.
    for (std::size_t i = polled.size(); i-- > 1;) {
      if (!polled[i].revents) continue;
      Started s = started[i - 1];
      int error = 0;
      ssize_t n;
      do n = ::read(s.report, &error, sizeof error);
      while (n < 0 && errno == EINTR);
      ::close(s.report);
      started.erase(started.begin() + static_cast<long>(i - 1));
      reply(s.id, s.pid, n == static_cast<ssize_t>(sizeof error) ? (error ? error : EIO) : 0);
    }
    if (!polled[0].revents) continue;
    int cut = 0;
    ssize_t n = pto::receive_message(kSocket, request_buf, sizeof request_buf, fds, cut);
    if (n == 0) return 0;  // the runner closed its end
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return 1;
    }
    pto::SpawnRequest req;
    if (cut || !pto::decode_spawn_request(std::string_view(request_buf, static_cast<std::size_t>(n)), req) ||
        fds.size() != req.fd_count()) {
      // Answered all the same (its step is not started), so that the runner never waits for it.
      close_all(fds);
      if (n >= 8) {
        std::uint64_t id;
        std::memcpy(&id, request_buf, sizeof id);
        reply(id, -1, cut ? cut : EINVAL);
      }
      continue;
    }
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) {
      reply(req.id, -1, errno);
      close_all(fds);
      continue;
    }
    pid_t pid = launch(req, fds, null_fd, report[1]);
    const int error = errno;
    ::close(report[1]);
    close_all(fds);
    if (pid < 0) {
      ::close(report[0]);
      reply(req.id, -1, error);
      continue;
    }
    started.push_back(Started{report[0], req.id, pid});
  }
}
