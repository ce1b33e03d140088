// The spawner process (exec/spawner, exec/spawner_main): steps it starts are this process's own children,
// in their cgroup and as their user, answered once exec'd; failures are errnos and leave no child; the executor
// goes on in-process when the spawner is gone. (A cancel that comes before the answer: executor_test.cpp.)
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <dirent.h>
#include <fstream>
#include <set>

#include "exec/cgroup_tree.h"
#include "exec/child_reaper.h"
#include "exec/executor.h"
#include "exec/spawn_wire.h"
#include "exec/spawner.h"
#include "test_support.h"

using namespace pto;
using namespace pto::test;

namespace {

std::string spawner_program() { return std::string(PTO_RUNNER_BUILD_DIR) + "/pto-spawner"; }

/// This process's children, from every thread's list.
std::set<pid_t> my_children() {
  std::set<pid_t> out;
  DIR* tasks = ::opendir("/proc/self/task");
  while (dirent* t = tasks ? ::readdir(tasks) : nullptr) {
    if (t->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + t->d_name + "/children");
    for (pid_t p; in >> p;) out.insert(p);
  }
  if (tasks) ::closedir(tasks);
  return out;
}

struct Answer {
  bool got = false;
  pid_t pid = -1;
  int error = 0;
  /// The spawner's callback that fills this in.
  Spawner::Done into() {
    return [this](pid_t p, int e) {
      got = true;
      pid = p;
      error = e;
    };
  }
};

/// A spawner started on its own io_context (`s` null when it could not be: `why` says).
struct Started {
  boost::asio::io_context io;
  std::string why;
  std::unique_ptr<Spawner> s = Spawner::start(io, spawner_program(), why);
};

Answer spawn_and_wait(boost::asio::io_context& io, Spawner& s, const SpawnSpec& spec) {
  Answer a;
  REQUIRE(s.spawn(spec, a.into()));
  io.restart();
  io.run();  // returns once answered: nothing is armed while no request is outstanding
  REQUIRE(a.got);
  return a;
}

}  // namespace

TEST_CASE("spawner: a step it starts is this process's child, in its cgroup, with its output, directory and environment", "[exec][spawner]") {
  TempDir t;
  Started st;
  REQUIRE(st.s);
  const std::string cgroup = CgroupTree::instance().available() ? CgroupTree::instance().make_child() : "";
  int out = ::open((t.path() / "out").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(out >= 0);
  SpawnSpec spec{{"/bin/bash", "-c", "echo ppid=$PPID; echo dir=$PWD; echo v=$V; cat /proc/self/cgroup; ls /proc/self/fd | wc -l"},
                 {"V=given", "PATH=/usr/bin:/bin"}, t.str(), out, cgroup};
  Answer a = spawn_and_wait(st.io, *st.s, spec);
  ::close(out);
  REQUIRE(a.error == 0);
  REQUIRE(a.pid > 0);
  int status = 0;
  REQUIRE(::waitpid(a.pid, &status, 0) == a.pid);  // ours to wait for: CLONE_PARENT made it our child
  owned_children::remove(a.pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::string text = read_file(t.path() / "out");
  CHECK(text.find("ppid=" + std::to_string(::getpid()) + "\n") != std::string::npos);
  CHECK(text.find("dir=" + t.str() + "\n") != std::string::npos);
  CHECK(text.find("v=given\n") != std::string::npos);
  if (!cgroup.empty()) {
    CHECK(text.find(cgroup.substr(cgroup.rfind('/'))) != std::string::npos);  // the step's cgroup, from its start
    CgroupTree::remove(cgroup);
  }
  // stdin, stdout, stderr and ls's own directory fd: nothing of the runner's or the spawner's leaked.
  CHECK(text.substr(text.rfind('\n', text.size() - 2) + 1) == "4\n");
}

TEST_CASE("spawner: a program that cannot start is an errno and leaves no child behind", "[exec][spawner]") {
  TempDir t;
  Started st;
  REQUIRE(st.s);
  const auto before = my_children();
  Answer missing = spawn_and_wait(st.io, *st.s, SpawnSpec{{"/nonexistent/program"}, {}, "", -1});
  CHECK(missing.pid == -1);
  CHECK(missing.error == ENOENT);
  Answer no_dir = spawn_and_wait(st.io, *st.s, SpawnSpec{{"/bin/true"}, {}, (t.path() / "absent").string(), -1});
  CHECK(no_dir.pid == -1);
  CHECK(no_dir.error == ENOENT);
  auto after = my_children();
  CHECK(after == before);  // the children that never exec'd were reaped, not left as zombies
}

TEST_CASE("spawner: gone, its requests fail with EPIPE or are refused, and the executor starts steps in-process", "[exec][spawner]") {
  Started st;
  REQUIRE(st.s);
  REQUIRE(::kill(st.s->pid(), SIGKILL) == 0);
  REQUIRE(::waitpid(st.s->pid(), nullptr, 0) == st.s->pid());
  Answer a;
  bool sent = st.s->spawn(SpawnSpec{{"/bin/true"}, {}, "", -1}, a.into());
  if (sent) {
    st.io.run();
    CHECK(a.got);
    CHECK(a.error == EPIPE);
  }
  CHECK_FALSE(st.s->alive());
  CHECK_FALSE(st.s->spawn(SpawnSpec{{"/bin/true"}, {}, "", -1}, [](pid_t, int) {}));
  // No spawner at all (a program that is not there): the executor's steps run anyway.
  CHECK_FALSE(Spawner::start(st.io, "/nonexistent/pto-spawner", st.why));
  CHECK(st.why.find("/nonexistent/pto-spawner") != std::string::npos);
}

TEST_CASE("spawner: a spawner too far behind to take a request leaves that one to the runner, and answers every one it took", "[exec][spawner]") {
  Started st;
  REQUIRE(st.s);
  // Stopped, it reads nothing: its socket fills with requests of 1 MiB each until a send finds no room.
  REQUIRE(::kill(st.s->pid(), SIGSTOP) == 0);
  SpawnSpec spec{{"/bin/true"}, {}, "", -1};
  for (int i = 0; i < 8; ++i) spec.env.push_back("BIG" + std::to_string(i) + "=" + std::string(120 << 10, 'x'));  // under exec's 128 KiB a string
  int sent = 0, answered = 0, started = 0;
  while (sent < 64 && st.s->spawn(spec, [&](pid_t pid, int error) {
    ++answered;
    if (pid > 0 && !error) {
      ++started;
      ::waitpid(pid, nullptr, 0);
      owned_children::remove(pid);
    }
  }))
    ++sent;
  CHECK(sent < 64);      // one was not taken (after waiting for room)
  CHECK(st.s->alive());     // which is not the spawner gone: the next request goes to it again
  REQUIRE(::kill(st.s->pid(), SIGCONT) == 0);
  st.io.run();              // every request it took is answered: none is left waiting
  CHECK(answered == sent);
  CHECK(started == sent);
}

TEST_CASE("spawner: while an answer is outstanding the orphan reaper leaves the children started since, and reaps older orphans", "[exec][spawner]") {
  auto zombie = [](pid_t p) {
    return read_file("/proc/" + std::to_string(p) + "/stat").find(") Z") != std::string::npos;
  };
  pid_t old_orphan = ::fork();
  if (old_orphan == 0) ::_exit(0);
  REQUIRE(old_orphan > 0);
  REQUIRE(wait_until([&] { return zombie(old_orphan); }, 10));
  ::usleep(50 * 1000);  // older than the request by more than the clocks' tick
  std::uint64_t token;
  {
    std::lock_guard<std::mutex> g(owned_children::lock());
    token = owned_children::spawning();
  }
  // Started after the request: it could be that request's step, its pid not registered yet.
  pid_t young = ::fork();
  if (young == 0) ::_exit(0);
  REQUIRE(young > 0);
  REQUIRE(wait_until([&] { return zombie(young); }, 10));
  CHECK(reap_orphans() >= 1);
  CHECK(::waitpid(old_orphan, nullptr, WNOHANG) == -1);  // reaped already: under a steady stream of spawns too
  CHECK(::kill(young, 0) == 0);                          // still there, a zombie
  {
    std::lock_guard<std::mutex> g(owned_children::lock());
    owned_children::spawned(token);
  }
  CHECK(reap_orphans() >= 1);
  CHECK(::waitpid(young, nullptr, WNOHANG) == -1);
}

TEST_CASE("spawner: its wire reads back what was written and refuses a cut request", "[exec][spawner]") {
  SpawnRequest r;
  r.id = 42;
  r.argv = {"/bin/bash", "-c", "echo 'a b'"};
  r.env = {"A=1", std::string(70000, 'x')};
  r.cwd = "/tmp";
  r.has_out = r.has_cgroup = r.drop = true;
  r.also_count = 2;
  r.uid = 1234;
  r.gid = 5678;
  r.groups = {1, 2, 3};
  r.max_processes = 8192;
  const std::string bytes = encode_spawn_request(r);
  SpawnRequest back;
  REQUIRE(decode_spawn_request(bytes, back));
  CHECK(back.id == 42);
  CHECK(back.argv == r.argv);
  CHECK(back.env == r.env);
  CHECK(back.cwd == "/tmp");
  CHECK((back.has_out && back.has_cgroup && back.drop));
  CHECK(back.fd_count() == 4);
  CHECK(back.uid == 1234);
  CHECK(back.gid == 5678);
  CHECK(back.groups == r.groups);
  CHECK(back.max_processes == 8192);
  for (std::size_t cut : {std::size_t{0}, std::size_t{7}, bytes.size() / 2, bytes.size() - 1})
    CHECK_FALSE(decode_spawn_request(std::string_view(bytes).substr(0, cut), back));
  CHECK_FALSE(decode_spawn_request(bytes + "x", back));
}
