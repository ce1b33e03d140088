#include "test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace pto::test {

TempDir::TempDir() {
  std::random_device rd;
  path_ = fs::temp_directory_path() / ("pto-test-" + std::to_string(getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path TempDir::write(const std::string& rel, const std::string& content) const {
  fs::path p = path_ / rel;
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool pid_running(int pid) {
  if (::kill(pid, 0) != 0) return false;
  return read_file("/proc/" + std::to_string(pid) + "/stat").find(") Z") == std::string::npos;
}

Spawned spawn_cli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  Spawned s;
  s.io = std::make_shared<TempDir>();
  s.out = s.io->path() / "out";
  s.err = s.io->path() / "err";
  const fs::path& out = s.out;
  const fs::path& err = s.err;
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(o, 1);
    dup2(e, 2);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    std::string bin = PTO_RUNNER_BIN;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  s.pid = pid;
  return s;
}

Background start_background(const std::vector<std::string>& argv, const fs::path& log) {
  Background b;
  b.log = log;
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);
    int o = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(o, 1);
    dup2(o, 2);
    std::vector<std::string> copy = argv;
    std::vector<char*> cargv;
    for (auto& a : copy) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  ::setpgid(pid, pid);
  b.pid = pid;
  return b;
}

int free_tcp_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("no free port");
  ::close(fd);
  return ntohs(a.sin_port);
}

Background& Background::operator=(Background&& o) noexcept {
  stop();
  pid = o.pid;
  log = std::move(o.log);
  o.pid = -1;
  return *this;
}

void Background::stop() {
  if (pid <= 0) return;
  ::kill(-pid, SIGTERM);
  for (int i = 0; i < 100 && ::waitpid(pid, nullptr, WNOHANG) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  pid = -1;
}

CommandResult wait_cli(Spawned& s) {
  int status = 0;
  waitpid(s.pid, &status, 0);
  const fs::path& out = s.out;
  const fs::path& err = s.err;
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

CommandResult run_cli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  Spawned s = spawn_cli(args, env);
  return wait_cli(s);
}

bool wait_until(const std::function<bool()>& pred, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

std::string valid_versions_env() {
  return "# PTOAS pin\n"
         "PTOAS_VERSION=v0.52\n"
         "PTOAS_SHA256_AARCH64=a64e7ee9753dde1bca0d4c71c0cb6950b4d1f8bdf1c39580b3af3d442bc3fe8b\n"
         "PTOAS_SHA256_X86_64=d24b81565ec3d3ead4b05d18d62e55d6e5dd56c7cd8dd243f041a6ed14024f75\n";
}

void write_project(const TempDir& dir, const std::map<std::string, std::string>& jobs,
                   const std::map<std::string, std::string>& models) {
  dir.write("toolchain/versions.env", valid_versions_env());
  for (const auto& [name, text] : jobs) dir.write("jobs/" + name, text);
  for (const auto& [name, text] : models) dir.write("models/" + name, text);
}

fs::path source_dir() { return PTO_RUNNER_SOURCE_DIR; }

bool have(const char* tool) { return sh(std::string("command -v ") + tool + " > /dev/null 2>&1") == 0; }

bool have_pytest() { return sh("/usr/bin/python3 -c 'import pytest' 2>/dev/null") == 0; }

int sh(const std::string& cmd, std::string* out) {
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) text.append(buf, n);
  int status = ::pclose(p);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool wait_for_content(const fs::path& p, double seconds) {
  return wait_until([&] { return fs::exists(p) && !read_file(p).empty(); }, seconds);
}

std::vector<int> ids_of(const std::string& list) {
  std::vector<int> out;
  std::stringstream in(list);
  for (std::string x; std::getline(in, x, ',');) out.push_back(std::stoi(x));
  return out;
}

}  // namespace pto::test
