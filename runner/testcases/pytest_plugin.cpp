#include "testcases/pytest_plugin.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pto {

std::string install_pytest_plugin(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create " + dir + ": " + ec.message();
  if (::chmod(dir.c_str(), 0755) != 0) return "cannot chmod " + dir + ": " + std::strerror(errno);
  const std::string path = dir + "/pto_runner_pytest.py";
  {
    std::ifstream in(path);
    std::stringstream have;
    have << in.rdbuf();
    if (in && have.str() == pytest_plugin_source()) return "";
  }
  const std::string tmp = path + ".new";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << pytest_plugin_source();
    if (!out.flush()) return "cannot write " + tmp;
  }
  if (::chmod(tmp.c_str(), 0644) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) return "cannot install " + path + ": " + std::strerror(errno);
  return "";
}

namespace {

std::string* find(std::vector<std::string>& env, const std::string& name) {
  for (auto& e : env)
    if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=') return &e;
  return nullptr;
}

void put(std::vector<std::string>& env, const std::string& name, const std::string& value) {
  if (std::string* e = find(env, name)) *e = name + "=" + value;
  else env.push_back(name + "=" + value);
}

}  // namespace

void add_pytest_env(std::vector<std::string>& env, const std::string& plugin_dir, const PytestRole& role) {
  std::string* path = find(env, "PYTHONPATH");
  const std::string old_path = path ? path->substr(11) : "";
  put(env, "PYTHONPATH", old_path.empty() ? plugin_dir : plugin_dir + ":" + old_path);
  std::string* opts = find(env, "PYTEST_ADDOPTS");
  const std::string old_opts = opts ? opts->substr(15) : "";
  put(env, "PYTEST_ADDOPTS", old_opts.empty() ? "-p pto_runner_pytest" : old_opts + " -p pto_runner_pytest");
  if (!role.collect_dir.empty()) {
    put(env, "PTO_RUNNER_TESTS_COLLECT", role.collect_dir);
    return;
  }
  put(env, "PTO_RUNNER_TESTS_DIR", role.report_dir);
  if (!role.skip_file.empty()) put(env, "PTO_RUNNER_TESTS_SKIP", role.skip_file);
  if (!role.only_file.empty()) put(env, "PTO_RUNNER_TESTS_ONLY", role.only_file);
  if (role.allow_empty) put(env, "PTO_RUNNER_TESTS_ALLOW_EMPTY", "1");
}

}  // namespace pto
