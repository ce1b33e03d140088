// The rules docs/architecture.md states about the layout, kept by a test rather than by prose (as Envoy's
// format check refuses a real-world clock read outside its TimeSource): every broken rule is reported with its
// file and line. The checker runs on the tree, and on a temporary tree with each rule broken on purpose, so a
// checker that stopped seeing a rule fails too.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "test_support.h"

using namespace pto::test;

namespace {

struct Violation {
  std::string file;  // relative to the tree
  int line = 0;
  std::string rule, message;
  std::string text() const { return file + ":" + std::to_string(line) + ": " + rule + ": " + message; }
};

/// One folder's include of another: where it is written.
struct Include {
  std::string file;
  int line = 0;
};

bool is_source(const fs::path& p) {
  const std::string n = p.filename().string();
  return p.extension() == ".h" || p.extension() == ".cpp" || n.size() > 7 && n.compare(n.size() - 7, 7, ".cpp.in") == 0;
}

/// A production file whose name reads like a test's: tools (coverage filters, linters, `duplicates`) and people
/// skip those.
bool test_like(const std::string& name) {
  static const std::regex like(R"(^test_.*|.*_tests?\.(cpp|h)$)");
  return std::regex_match(name, like);
}

/// A read of a real clock: the chrono clocks' now() (also through an alias named Clock), time(), clock_gettime().
bool reads_clock(const std::string& line) {
  static const std::regex read(R"((_clock|\bClock|::clock)::now\s*\(|\bstd::time\s*\(|\bclock_gettime\s*\(|\bgettimeofday\s*\()");
  const std::string code = line.substr(0, line.find("//"));
  return std::regex_search(code, read);
}

/// Checks the source tree under `root` (its `runner/`): the folder include graph has no cycle, no file is named
/// A part of a run's folder spelled by hand (`run_dir + "/logs"`, `fs::path(run_dir) / "files"`): the parts are
/// util/state_paths' to name, so a move of one is one change.
bool spells_run_folder(const std::string& line) {
  static const std::regex part(R"re(\brun_dir_?\s*(\+\s*"/[a-z]|/\s*"[a-z])|fs::path\([^)]*\brun_dir_?\)\s*/\s*"[a-z])re");
  return std::regex_search(line, part);
}

/// like a test, and the real clocks are read in util/clock alone (everything else asks it: one clock, one place
/// to look when time misbehaves, and a test can tell what reads time).
std::vector<Violation> check_layout(const fs::path& root) {
  std::vector<Violation> out;
  const fs::path runner = root / "runner";
  std::map<std::string, std::map<std::string, Include>> edges;  // folder -> folder it includes -> first place
  static const std::regex include_re(R"re(^\s*#\s*include\s+"([a-z_]+)/[^"]+")re");
  for (const auto& e : fs::recursive_directory_iterator(runner)) {
    if (!e.is_regular_file() || !is_source(e.path())) continue;
    const fs::path rel = fs::relative(e.path(), root);
    const fs::path in_runner = fs::relative(e.path(), runner);
    if (test_like(e.path().filename().string()))
      out.push_back({rel.string(), 1, "test-like-name", "a production file named like a test: name it by its concept"});
    if (in_runner.begin() == in_runner.end() || std::next(in_runner.begin()) == in_runner.end()) continue;  // runner/main.cpp
    const std::string folder = in_runner.begin()->string();
    const bool clock_home = in_runner.parent_path() == "util" && in_runner.stem() == "clock";
    const bool paths_home = in_runner.parent_path() == "util" && in_runner.stem() == "state_paths";
    std::ifstream in(e.path());
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      if (!clock_home && reads_clock(line))
        out.push_back({rel.string(), n, "clock-read", "a real clock read outside util/clock: use its steady_now(), wall_now() or a Clock"});
      if (!paths_home && spells_run_folder(line))
        out.push_back({rel.string(), n, "run-folder", "a part of a run's folder spelled here: name it in util/state_paths"});
      std::smatch m;
      if (!std::regex_search(line, m, include_re)) continue;
      const std::string to = m[1];
      if (to == folder || !fs::is_directory(runner / to)) continue;
      edges[folder].emplace(to, Include{rel.string(), n});
    }
  }
  // Every include that closes a loop: A includes B and B reaches A again.
  std::function<bool(const std::string&, const std::string&, std::set<std::string>&, std::vector<std::string>&)> reaches =
      [&](const std::string& from, const std::string& target, std::set<std::string>& seen, std::vector<std::string>& path) {
        if (from == target) return true;
        if (!seen.insert(from).second) return false;
        for (const auto& [next, where] : edges[from]) {
          path.push_back(next);
          if (reaches(next, target, seen, path)) return true;
          path.pop_back();
        }
        return false;
      };
  for (const auto& [a, tos] : edges)
    for (const auto& [b, where] : tos) {
      std::set<std::string> seen;
      std::vector<std::string> path = {a, b};
      if (!reaches(b, a, seen, path)) continue;
      std::string loop;
      for (const std::string& f : path) loop += (loop.empty() ? "" : " -> ") + f + "/";
      out.push_back({where.file, where.line, "folder-cycle", "folders include each other: " + loop});
    }
  return out;
}

/// The composition root stays one (issue 48): `serve`'s parts are wired in runner/daemon/daemon.cpp, under 300
/// lines, by a `Daemon` of at most 12 fields (runner/daemon/daemon.h); behaviour belongs to the parts it wires.
void check_composition_root(const fs::path& root, std::vector<Violation>& out) {
  constexpr int kMaxLines = 299, kMaxFields = 12;
  std::ifstream cpp(root / "runner/daemon/daemon.cpp");
  int lines = 0;
  for (std::string line; std::getline(cpp, line);) ++lines;
  if (lines > kMaxLines)
    out.push_back({"runner/daemon/daemon.cpp", kMaxLines + 1, "composition-root",
                   std::to_string(lines) + " lines: the daemon wires its parts; give the behaviour to the part it is about"});
  std::ifstream h(root / "runner/daemon/daemon.h");
  static const std::regex field(R"(^\s*[A-Za-z_][\w:<>,\s\*&]*[\s\*&]\w+_\s*(\{[^}]*\})?\s*;\s*$)");
  bool in_daemon = false;
  int n = 0, fields = 0;
  for (std::string line; std::getline(h, line);) {
    ++n;
    if (line.rfind("class Daemon", 0) == 0) in_daemon = true;
    else if (in_daemon && line.rfind("};", 0) == 0) in_daemon = false;
    const std::string code = line.substr(0, line.find("//"));
    if (in_daemon && std::regex_match(code, field) && ++fields == kMaxFields + 1)
      out.push_back({"runner/daemon/daemon.h", n, "composition-root", "Daemon's field " + std::to_string(fields) + ": at most " +
                                                                            std::to_string(kMaxFields) + "; a part owns its own state"});
  }
}

std::string listing(const std::vector<Violation>& vs) {
  std::string s;
  for (const auto& v : vs) s += v.text() + "\n";
  return s;
}

}  // namespace

TEST_CASE("architecture: the tree keeps the layout's rules (no folder cycle, no production file named like a test, the clocks read "
          "in util/clock alone, a run folder's parts named in util/state_paths alone, a small composition root)", "[architecture]") {
  std::vector<Violation> found = check_layout(source_dir());
  check_composition_root(source_dir(), found);
  INFO(listing(found));
  CHECK(found.empty());
}

TEST_CASE("architecture: the checker finds each rule broken on purpose in a tree of its own, at the file and line", "[architecture]") {
  TempDir t;
  t.write("runner/util/clock.h", "#pragma once\n");
  t.write("runner/engine/engine.h", "#pragma once\n#include <string>\n#include \"util/clock.h\"\n#include \"store/journal.h\"\n");
  t.write("runner/store/journal.h", "#pragma once\n#include \"read_model/view.h\"\n");
  t.write("runner/read_model/view.h", "#pragma once\n\n#include \"engine/engine.h\"  // a value type from above: the loop\n");
  t.write("runner/testcases/test_verdict.cpp", "int x;\n");
  t.write("runner/daemon/daemon_tests.cpp", "int y;\n");
  t.write("runner/util/clock.cpp", "auto t = std::chrono::steady_clock::now();  // its home: allowed\n");
  t.write("runner/sched/pool.cpp", "// steady_clock::now() in a comment is no read\nauto a = std::chrono::steady_clock::now();\n"
                                   "using Clock = std::chrono::system_clock;\nauto b = Clock::now();\nlong c = std::time(nullptr);\n"
                                   "double d = clock_.now();  // a Clock object: the engine's seam\n");
  t.write("runner/engine/logs.cpp", "auto a = run_logs(run_dir) + \"/x.log\";  // inside its part: allowed\n"
                                    "auto b = opts_.run_dir + \"/logs\";\nauto c = fs::path(opts_.run_dir) / \"files\";\n");
  t.write("runner/util/state_paths.h", "inline std::string run_logs(const std::string& run_dir) { return run_dir + \"/logs\"; }\n");
  std::string daemon_cpp, daemon_h = "#pragma once\nclass Daemon {\n private:\n  void wire();\n";
  for (int i = 0; i < 300; ++i) daemon_cpp += "// wiring\n";
  for (int i = 0; i < 13; ++i) daemon_h += "  std::unique_ptr<Part> part" + std::to_string(i) + "_;  // a part\n";
  t.write("runner/daemon/daemon.cpp", daemon_cpp);
  t.write("runner/daemon/daemon.h", daemon_h + "};\nstruct After { int not_counted_; };\n");
  std::vector<Violation> found = check_layout(t.path());
  check_composition_root(t.path(), found);
  const std::string all = listing(found);
  INFO(all);
  CHECK(all.find("runner/engine/engine.h:4: folder-cycle: folders include each other: engine/ -> store/ -> read_model/ -> engine/") !=
        std::string::npos);
  CHECK(all.find("runner/read_model/view.h:3: folder-cycle: folders include each other: read_model/ -> engine/ -> store/ -> read_model/") !=
        std::string::npos);
  CHECK(all.find("runner/testcases/test_verdict.cpp:1: test-like-name") != std::string::npos);
  CHECK(all.find("runner/daemon/daemon_tests.cpp:1: test-like-name") != std::string::npos);
  CHECK(all.find("runner/sched/pool.cpp:2: clock-read") != std::string::npos);
  CHECK(all.find("runner/sched/pool.cpp:4: clock-read") != std::string::npos);
  CHECK(all.find("runner/sched/pool.cpp:5: clock-read") != std::string::npos);
  CHECK(all.find("runner/engine/logs.cpp:2: run-folder") != std::string::npos);
  CHECK(all.find("runner/engine/logs.cpp:3: run-folder") != std::string::npos);
  CHECK(all.find("runner/util/") == std::string::npos);  // an include down the layers is no loop, util/ is the home of both
  CHECK(all.find("runner/daemon/daemon.cpp:300: composition-root: 300 lines") != std::string::npos);
  CHECK(all.find("runner/daemon/daemon.h:17: composition-root: Daemon's field 13") != std::string::npos);
  // the three includes of the loop, the two names, the three reads, the two spelled parts, the root's two
  CHECK(found.size() == 12);
}
