#include "exec/spawn_process.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

namespace pto {

std::vector<char*> exec_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& v : strings) out.push_back(const_cast<char*>(v.c_str()));
  out.push_back(nullptr);
  return out;
}

int become_step(const StepChild& c) {
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);
  if (c.procs_fd >= 0) {
    // This child's pid, as text, without the C++ library.
    pid_t me = ::getpid();
    char digits[24], text[24];
    int n = 0;
    do digits[n++] = static_cast<char>('0' + me % 10), me /= 10;
    while (me > 0);
    for (int i = 0; i < n; ++i) text[i] = digits[n - 1 - i];
    if (::write(c.procs_fd, text, static_cast<std::size_t>(n)) != n) return errno ? errno : EIO;
  }
  // The v1 hierarchies' `tasks` files, given "0": this thread, which is the whole process (a fresh child has
  // one). Moving the current thread alone skips the kernel's global threadgroup lock, whose writer waits for
  // every fork and exit in progress on the host; moving a pid through cgroup.procs takes it (bench/README.md,
  // "The spawner": the sandbox's limits cost 0.13x of dispatch that way).
  for (std::size_t i = 0; i < c.also_count; ++i)
    if (::write(c.also_fds[i], "0", 1) != 1) return errno ? errno : EIO;
  ::setpgid(0, 0);
  if (c.max_processes) {
    rlimit lim{c.max_processes, c.max_processes};
    ::setrlimit(RLIMIT_NPROC, &lim);
  }
  // Root no more: the run's own user, its groups, and nothing a setuid program could give back. (In the
  // cgroup first: a user cannot move itself there, and cannot leave it.) Raw system calls: glibc's wrappers
  // would broadcast the change to every thread of the process, and a vfork child shares the daemon's memory.
  if (c.drop && (::syscall(SYS_setgroups, c.group_count, c.groups) != 0 || ::syscall(SYS_setresgid, c.gid, c.gid, c.gid) != 0 ||
                 ::syscall(SYS_setresuid, c.uid, c.uid, c.uid) != 0 || ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0))
    return errno ? errno : EPERM;
  if (c.out_fd >= 0) {
    ::dup2(c.null_fd, 0);
    ::dup2(c.out_fd, 1);
    ::dup2(c.out_fd, 2);
    // No lock, socket or journal fd leaks into a step; close-on-exec rather than closed, so that a report
    // pipe the caller watches (the spawner's) stays open until the exec.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  }
  if (*c.cwd && ::chdir(c.cwd) != 0) return errno;
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(c.argv[0], c.argv, c.envp);
  return errno;
}

namespace {

/// Starts `argv` with posix_spawn: a new process group, default signal dispositions, an empty signal mask,
/// stdin from /dev/null, stdout and stderr to `out_fd`, every other descriptor closed, in `cwd`.
///
/// Why not Boost.Process's default launcher: it fork()s the runner, and copying then tearing down the
/// runner's page tables was the largest share of per-step cost (perf, bench/README.md). glibc's posix_spawn
/// uses vfork semantics. Boost.Process v2 still owns the process from there on (pidfd wait, exit status).
pid_t spawn_plain(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& cwd,
                  int out_fd, int& error) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  if (out_fd >= 0) {
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // no lock, socket or journal fd leaks into a step
  }
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);  // ignored signals (SIGPIPE) would otherwise survive exec
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> cargv = exec_strings(argv), cenv = exec_strings(env);
  pid_t pid = -1;
  error = posix_spawn(&pid, cargv[0], &fa, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return error ? -1 : pid;
}

/// The same, but the child enters `cgroup` before it execs, so nothing it ever starts is outside it: a vfork
/// child (the parent waits, as with posix_spawn) writes its own pid into cgroup.procs, then sets itself up as
/// posix_spawn would and execs. (Moving the shell after posix_spawn returned raced with the shell's first fork:
/// the parent thread is not always scheduled before bash runs its command.) Returns -1 with `error` set when
/// the cgroup cannot be entered or the exec fails.
pid_t spawn_in_cgroup(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& cwd,
                      int out_fd, const std::string& cgroup, const std::vector<std::string>& also_join,
                      const std::optional<RunAs>& run_as, unsigned long max_processes, int& error) {
  // Everything the child needs is made before vfork: it may only make system calls.
  std::vector<char*> cargv = exec_strings(argv), cenv = exec_strings(env);
  const std::string procs = cgroup + "/cgroup.procs";
  const std::vector<gid_t> groups = run_as ? run_as->groups : std::vector<gid_t>{};
  std::vector<int> also_fds;
  for (const auto& dir : also_join) also_fds.push_back(::open((dir + "/tasks").c_str(), O_WRONLY | O_CLOEXEC));
  // Everything the vfork child reads is in memory (heap), not in registers a vfork could clobber.
  auto child = std::make_unique<StepChild>();
  child->argv = cargv.data();
  child->envp = cenv.data();
  child->cwd = cwd.c_str();
  child->out_fd = out_fd;
  child->null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  child->procs_fd = cgroup.empty() ? -2 : ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
  child->also_fds = also_fds.data();
  child->also_count = also_fds.size();
  child->drop = run_as.has_value();
  child->uid = run_as ? run_as->uid : 0;
  child->gid = run_as ? run_as->gid : 0;
  child->groups = groups.data();
  child->group_count = groups.size();
  child->max_processes = max_processes;
  auto close_all = [&] {
    if (child->procs_fd >= 0) ::close(child->procs_fd);
    if (child->null_fd >= 0) ::close(child->null_fd);
    for (int fd : also_fds)
      if (fd >= 0) ::close(fd);
  };
  if (child->procs_fd == -1 || child->null_fd < 0 || std::count(also_fds.begin(), also_fds.end(), -1)) {
    error = errno;
    close_all();
    return -1;
  }
  auto child_errno = std::make_unique<int>(0);
  int* reported = child_errno.get();
  const StepChild* plan = child.get();
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);  // no handler of ours runs in the child
  pid_t pid = ::vfork();
  if (pid == 0) {
    *reported = become_step(*plan);
    ::_exit(127);
  }
  int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  close_all();
  if (pid < 0) {
    error = fork_errno;
    return -1;
  }
  if (*reported) {  // it never exec'd: reap it here, nobody else will
    int status = 0;
    ::waitpid(pid, &status, 0);
    error = *reported;
    return -1;
  }
  return pid;
}

/// glibc's own clone3 wrapper (2.34 and later): runs `fn(arg)` in the child on the stack it is given. Private
/// to glibc, so only a static link has it (task-submit's, which asks for it: CMakeLists.txt); elsewhere it is
/// null and the child is cloned with fork semantics.
extern "C" int __clone3(clone_args* args, std::size_t size, int (*fn)(void*), void* arg) __attribute__((weak));

/// What the clone3 child is given: how to become the command, and where to say why it could not.
struct ClonedChild {
  StepChild step;
  int report_fd = -1;
};

int become_cloned_step(void* arg) {
  const auto* c = static_cast<const ClonedChild*>(arg);
  const int failed = become_step(c->step);
  ssize_t ignored = ::write(c->report_fd, &failed, sizeof failed);
  (void)ignored;
  return 127;
}

/// The child started straight in `cgroup` (clone3 with CLONE_INTO_CGROUP), set up as posix_spawn would
/// (become_step) and exec'd; a close-on-exec pipe tells the caller whether the exec happened. With glibc's
/// clone3 wrapper at hand, with vfork semantics: the child shares the caller's memory, on a stack of its own in
/// the caller's frame, and the caller waits for its exec (CLONE_VM | CLONE_VFORK), so nothing of the caller is
/// copied or marked copy-on-write (each page the caller then wrote again was a page fault: 11 us each on a VM
/// that shadows page tables, ~25 a lease; bench/README.md). Without it, fork semantics. Returns -1 with
/// `error` ENOSYS or EINVAL where the kernel has no clone3 or CLONE_INTO_CGROUP (before 5.7), so the caller
/// can fall back to moving the child.
pid_t spawn_cloned_into_cgroup(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& cwd,
                               int out_fd, const std::string& cgroup, int& error) {
  std::vector<char*> cargv = exec_strings(argv), cenv = exec_strings(env);
  int cg_fd = ::open(cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int null_fd = out_fd >= 0 ? ::open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
  int report[2] = {-1, -1};
  if (cg_fd < 0 || (out_fd >= 0 && null_fd < 0) || ::pipe2(report, O_CLOEXEC) != 0) {
    error = errno;
    for (int fd : {cg_fd, null_fd, report[0], report[1]})
      if (fd >= 0) ::close(fd);
    return -1;
  }
  ClonedChild child;
  child.step.argv = cargv.data();
  child.step.envp = cenv.data();
  child.step.cwd = cwd.c_str();
  child.step.out_fd = out_fd;
  child.step.null_fd = null_fd;  // procs_fd stays -1: the kernel puts it in its cgroup
  child.report_fd = report[1];
  clone_args args{};
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<std::uint64_t>(cg_fd);
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);  // no handler of ours runs in the child
  long pid;
  if (__clone3) {
    alignas(16) char stack[16 * 1024];  // the child's, in our frame: we wait until its exec
    args.flags |= CLONE_VM | CLONE_VFORK;
    args.stack = reinterpret_cast<std::uint64_t>(stack);
    args.stack_size = sizeof stack;
    pid = __clone3(&args, sizeof args, become_cloned_step, &child);
  } else {
    pid = ::syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) ::_exit(become_cloned_step(&child));
  }
  const int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::close(cg_fd);
  if (null_fd >= 0) ::close(null_fd);
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    error = clone_errno;
    return -1;
  }
  int child_errno = 0;
  ssize_t n;
  do n = ::read(report[0], &child_errno, sizeof child_errno);
  while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {  // it never exec'd: reap it here, nobody else will
    ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
    error = child_errno;
    return -1;
  }
  return static_cast<pid_t>(pid);
}

}  // namespace

pid_t spawn_process(const SpawnSpec& spec, int& error) {
  error = 0;
  if (spec.cgroup.empty() && spec.also_join.empty() && !spec.run_as && !spec.max_processes)
    return spawn_plain(spec.argv, spec.env, spec.cwd, spec.out_fd, error);
  // clone3's path sets up no user, extra cgroups or process cap: a spec that needs them takes the vfork path.
  if (spec.fork_into_cgroup && !spec.cgroup.empty() && !spec.run_as && spec.also_join.empty() && !spec.max_processes) {
    pid_t pid = spawn_cloned_into_cgroup(spec.argv, spec.env, spec.cwd, spec.out_fd, spec.cgroup, error);
    if (pid >= 0 || (error != ENOSYS && error != EINVAL && error != E2BIG)) return pid;
    error = 0;  // a kernel without CLONE_INTO_CGROUP: move the child instead
  }
  return spawn_in_cgroup(spec.argv, spec.env, spec.cwd, spec.out_fd, spec.cgroup, spec.also_join, spec.run_as, spec.max_processes,
                         error);
}

}  // namespace pto
