// The cgroup tree's recycling of step cgroups: entering a freshly made cgroup costs the first process ~1 ms in
// the kernel, so an emptied one is handed to the next step; one that still holds a process never is.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>

#include "exec/cgroup_files.h"
#include "exec/cgroup_tree.h"
#include "exec/spawn_process.h"
#include "test_support.h"

using namespace pto;
using namespace pto::test;
namespace fs = std::filesystem;

// Each case needs a writable cgroup v2 with cgroup.kill; without one it says so and passes nothing.
#define SKIP_WITHOUT_CGROUPS(tree)                                                            \
  if (!(tree).available()) {                                                                  \
    WARN("SKIPPED: no writable cgroup v2 with cgroup.kill here (" << (tree).why_not() << ")"); \
    return;                                                                                   \
  }

TEST_CASE("cgroup tree: an emptied step cgroup is handed out again, one with a process left in it never is", "[exec]") {
  CgroupTree& tree = CgroupTree::instance();
  SKIP_WITHOUT_CGROUPS(tree);
  std::string a = tree.make_child();
  REQUIRE(!a.empty());
  tree.recycle(a);
  CHECK(tree.make_child() == a);

  int err = 0;
  pid_t pid = spawn_process({{"/bin/sleep", "30"}, {"PATH=/usr/bin:/bin"}, "", -1, a}, err);
  REQUIRE(pid > 0);
  REQUIRE(CgroupTree::populated(a));
  tree.recycle(a);  // something is still in it: not kept, and not removable either
  std::string b = tree.make_child();
  CHECK(b != a);
  CHECK(CgroupTree::processes(b).empty());
  CHECK(fs::exists(a));

  CgroupTree::signal_all(a, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(wait_until([&] { return !CgroupTree::populated(a); }, 5));
  CgroupTree::remove(a);
  CHECK(!fs::exists(a));
  tree.recycle(b);
}

TEST_CASE("cgroup tree: a lease's cgroup in another tree (a supervisor's) is handed out again only under that tree, and a name taken there is skipped", "[exec]") {
  CgroupTree& tree = CgroupTree::instance();
  SKIP_WITHOUT_CGROUPS(tree);
  // A sibling of this process's tree, as a step supervisor's is.
  const std::string other = fs::path(tree.root()).parent_path().string() + "/pto-runner-test-" + std::to_string(::getpid());
  REQUIRE(::mkdir(other.c_str(), 0755) == 0);
  std::string a = tree.make_child(other, "lease");
  REQUIRE(!a.empty());
  CHECK(fs::path(a).parent_path() == other);
  CHECK(fs::path(a).filename().string().rfind("lease-", 0) == 0);
  tree.recycle(a);
  const std::string own = tree.make_child();  // this tree's own: never the other tree's spare one
  CHECK(fs::path(own).parent_path() == tree.root());
  CHECK(own != a);
  CHECK(tree.make_child(other, "lease") == a);  // under its own tree: handed on
  // The next names there taken already (an earlier daemon's): skipped, not failed.
  const std::string next = fs::path(a).filename().string();
  const int n = std::stoi(next.substr(next.find('-') + 1));
  for (int i = 1; i <= 3; ++i) ::mkdir((other + "/lease-" + std::to_string(n + i)).c_str(), 0755);
  std::string b = tree.make_child(other, "lease");
  CHECK(!b.empty());
  CHECK(b != a);
  CHECK(fs::path(b).parent_path() == other);
  for (const auto& c : fs::directory_iterator(other)) CgroupTree::remove(c.path().string());
  ::rmdir(other.c_str());
  tree.recycle(own);
}

TEST_CASE("cgroup tree: a cgroup killed through cgroup.kill is never handed out again (a process cloned into it would be killed)", "[exec]") {
  CgroupTree& tree = CgroupTree::instance();
  SKIP_WITHOUT_CGROUPS(tree);
  std::string a = tree.make_child();
  REQUIRE(!a.empty());
  int err = 0;
  pid_t pid = spawn_process({{"/bin/sleep", "30"}, {"PATH=/usr/bin:/bin"}, "", -1, a}, err);
  REQUIRE(pid > 0);
  CgroupTree::signal_all(a, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WTERMSIG(status) == SIGKILL);
  REQUIRE(wait_until([&] { return !CgroupTree::populated(a); }, 5));
  tree.recycle(a, /*known_empty=*/true);
  CHECK_FALSE(fs::exists(a));  // removed, not kept
  std::string b = tree.make_child();
  CHECK(b != a);
  // The one handed out instead is fresh: a process cloned into it runs to its end. (Cloned into the killed
  // one, this kernel SIGKILLs it at once: the executor tests' cancelled and timed-out steps showed it.)
  SpawnSpec cloned{{"/bin/sleep", "0.2"}, {"PATH=/usr/bin:/bin"}, "", -1, b};
  cloned.fork_into_cgroup = true;
  pid = spawn_process(cloned, err);
  REQUIRE(pid > 0);
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));  // a fresh cgroup: the process ran to its end
  tree.recycle(b);
}

TEST_CASE("cgroup files: a kept descriptor follows its cgroup: forgotten when it is removed, opened again when it went away unseen", "[exec]") {
  CgroupTree& tree = CgroupTree::instance();
  SKIP_WITHOUT_CGROUPS(tree);
  const std::string a = tree.make_child();
  REQUIRE(!a.empty());
  CHECK(cgroup_files::read(a + "/cgroup.events").find("populated 0") != std::string::npos);
  const int fd = cgroup_files::descriptor(a, O_RDONLY | O_DIRECTORY);
  REQUIRE(fd >= 0);
  CHECK(cgroup_files::descriptor(a, O_RDONLY | O_DIRECTORY) == fd);  // kept: the same descriptor again
  // Removed behind its back and made again at the same path: the dead descriptor is dropped and the file read
  // through a new one.
  REQUIRE(::rmdir(a.c_str()) == 0);
  REQUIRE(::mkdir(a.c_str(), 0755) == 0);
  int err = 0;
  pid_t pid = spawn_process({{"/bin/sleep", "30"}, {"PATH=/usr/bin:/bin"}, "", -1, a}, err);
  REQUIRE(pid > 0);
  CHECK(CgroupTree::populated(a));
  CgroupTree::signal_all(a, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  REQUIRE(wait_until([&] { return !CgroupTree::populated(a); }, 5));
  // Removed through the tree: its descriptors are closed first (a later one for the path is a new one).
  CgroupTree::remove(a);
  CHECK_FALSE(fs::exists(a));
  CHECK(::fcntl(fd, F_GETFD) == -1);  // closed by forget()
  CHECK(cgroup_files::read(a + "/cgroup.events").empty());
}
