// The docs are true (SPEC "What the docs and the CLI say is true"), beyond what docs_test.cpp checks (the site
// builds, the commands shown exist with their flags): every internal link and anchor of the pages resolves, every source file a page names exists, and the shell blocks a page marks runnable
// (`<!-- runnable -->` on the line before the fence) run as the page says against a live daemon set up as an
// installed host: its runner.yml in a directory the commands are pointed at as they would find
// /etc/pto-runner/runner.yml ($PTO_RUNNER_CONFIG), the token where the daemon writes it. A line expects exit 0
// unless its comment says `exit N`. `<!-- runnable: in a clone -->` runs the block in a copy of this tree's
// definitions (jobs/, models/, toolchain/, ci/: a maintainer's clone of pypto, so nothing is written into the
// source tree), the others in an empty directory (anywhere on the host).
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "served_daemon.h"
#include "test_support.h"

using namespace pto::test;

namespace {

const fs::path kSource = source_dir();

std::vector<fs::path> pages() {
  std::vector<fs::path> out = {kSource / "README.md", kSource / "bench/README.md"};
  for (const auto& e : fs::directory_iterator(kSource / "docs"))
    if (e.path().extension() == ".md") out.push_back(e.path());
  return out;
}

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

/// A heading's anchor as MkDocs (Python-Markdown's toc) makes it: lower case, punctuation dropped, runs of
/// spaces and hyphens one hyphen.
std::string slug(const std::string& heading) {
  std::string kept;
  for (unsigned char c : heading)
    if (std::isalnum(c) || c == '_' || c == ' ' || c == '-' || c >= 0x80) kept += static_cast<char>(std::tolower(c));
  while (!kept.empty() && kept.back() == ' ') kept.pop_back();
  while (!kept.empty() && kept.front() == ' ') kept.erase(kept.begin());
  std::string out;
  for (char c : kept) {
    if (c == ' ' || c == '-') {
      if (out.empty() || out.back() != '-') out += '-';
    } else {
      out += c;
    }
  }
  return out;
}

std::set<std::string> anchors_of(const fs::path& page) {
  std::set<std::string> out;
  bool fenced = false;
  for (const auto& l : lines_of(page)) {
    if (l.rfind("```", 0) == 0) fenced = !fenced;
    if (fenced || l.empty() || l[0] != '#') continue;
    std::string text = l.substr(l.find_first_not_of('#'));
    std::string plain;  // `code` in a heading keeps its text
    for (char c : text)
      if (c != '`') plain += c;
    out.insert(slug(plain));
  }
  return out;
}

/// Every broken link of `page`: "page:line: [text](target): why".
std::vector<std::string> broken_links(const fs::path& page) {
  std::vector<std::string> out;
  static const std::regex link(R"(\]\(([^)\s]+)\))");
  bool fenced = false;
  const auto lines = lines_of(page);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string l = lines[i];
    if (l.rfind("```", 0) == 0) fenced = !fenced;
    if (fenced) continue;
    l = std::regex_replace(l, std::regex("`[^`]*`"), "");  // links inside code are text
    for (std::sregex_iterator m(l.begin(), l.end(), link), end; m != end; ++m) {
      const std::string target = (*m)[1];
      if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0 || target.rfind("mailto:", 0) == 0) continue;
      const auto hash = target.find('#');
      const std::string file = target.substr(0, hash), anchor = hash == std::string::npos ? "" : target.substr(hash + 1);
      const fs::path to = file.empty() ? page : (page.parent_path() / file).lexically_normal();
      const std::string where = page.lexically_relative(kSource).string() + ":" + std::to_string(i + 1) + ": (" + target + ")";
      if (!fs::exists(to)) out.push_back(where + ": no such file " + to.lexically_relative(kSource).string());
      else if (!anchor.empty() && to.extension() == ".md" && !anchors_of(to).count(anchor))
        out.push_back(where + ": no heading makes #" + anchor + " in " + to.lexically_relative(kSource).string());
    }
  }
  return out;
}

/// Source files a page names in backticks as FOLDER/NAME where FOLDER is one of runner/'s: each must exist.
std::vector<std::string> missing_sources(const fs::path& page) {
  std::vector<std::string> out;
  static const std::regex named("`([a-z_]+)/([A-Za-z0-9_.]+)`");
  const auto lines = lines_of(page);
  for (std::size_t i = 0; i < lines.size(); ++i)
    for (std::sregex_iterator m(lines[i].begin(), lines[i].end(), named), end; m != end; ++m) {
      const fs::path folder = kSource / "runner" / (*m)[1].str();
      if (!fs::is_directory(folder)) continue;
      const std::string name = (*m)[2];
      if (fs::exists(folder / name) || fs::exists(folder / (name + ".h")) || fs::exists(folder / (name + ".cpp"))) continue;
      if (fs::exists(kSource / (*m)[1].str() / name)) continue;  // a file of the repository's own (toolchain/ptoas.yml)
      out.push_back(page.lexically_relative(kSource).string() + ":" + std::to_string(i + 1) + ": " + (*m)[0].str() +
                    " names no file under runner/");
    }
  return out;
}

struct RunnableLine {
  fs::path page;
  std::size_t line = 0;
  std::string command;
  int expect = 0;
  bool in_clone = false;
};

std::vector<RunnableLine> runnable_lines(const fs::path& page) {
  std::vector<RunnableLine> out;
  const auto lines = lines_of(page);
  static const std::regex exit_note(R"(#.*\bexit (\d+))");
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    if (lines[i].rfind("<!-- runnable", 0) != 0 || lines[i + 1].rfind("```sh", 0) != 0) continue;
    const bool in_clone = lines[i].find("in a clone") != std::string::npos;
    for (std::size_t j = i + 2; j < lines.size() && lines[j].rfind("```", 0) != 0; ++j) {
      const std::string& l = lines[j];
      if (l.find_first_not_of(' ') == std::string::npos || l[l.find_first_not_of(' ')] == '#') continue;
      RunnableLine r{page, j + 1, l, 0, in_clone};
      std::smatch m;
      if (std::regex_search(l, m, exit_note)) r.expect = std::stoi(m[1]);
      out.push_back(r);
    }
  }
  return out;
}

/// Runs each line as the page's reader would type it; "page:line: `command` exited N, the page says M" for each
/// that does not.
std::vector<std::string> run_lines(const std::vector<RunnableLine>& lines, const std::string& config, const fs::path& elsewhere,
                                   const fs::path& clone) {
  std::vector<std::string> out;
  const std::string bin = fs::path(PTO_RUNNER_BIN).parent_path().string();
  for (const auto& r : lines) {
    const fs::path cwd = r.in_clone ? clone : elsewhere;
    std::string said;
    const int rc = sh("cd '" + cwd.string() + "' && PATH='" + bin + "':\"$PATH\" PTO_RUNNER_CONFIG='" + config +
                          "' PTO_RUNNER_SERVER= PTO_RUNNER_TOKEN= GITHUB_ACTIONS= sh -c '" +
                          std::regex_replace(r.command, std::regex("'"), "'\\''") + "' 2>&1",
                      &said);
    if (rc != r.expect)
      out.push_back(r.page.lexically_relative(kSource).string() + ":" + std::to_string(r.line) + ": `" + r.command + "` exited " +
                    std::to_string(rc) + ", the page says " + std::to_string(r.expect) + "\n" + said);
  }
  return out;
}

/// A daemon as an installed host runs it: runner.yml with its Unix socket and state dir, 8 cards.
struct InstalledHost {
  Served s;
  std::string config;
  fs::path elsewhere, clone;
  InstalledHost() {
    s.devices = "0-7";
    config = s.dir.write("etc/pto-runner/runner.yml",
                         "listen: 127.0.0.1:0\nlisten-unix: " + s.dir.str() + "/api.sock\nstate-dir: " + s.state() +
                             "\ndevices:\n  lock-dir: " + s.locks() + "\nsupervise: false\n")
                 .string();
    s.start({"--config", config});
    elsewhere = s.dir.path() / "anywhere";
    fs::create_directories(elsewhere);
    clone = s.dir.path() / "clone";
    fs::create_directories(clone);
    for (const char* d : {"jobs", "models", "toolchain", "ci"})
      fs::copy(kSource / d, clone / d, fs::copy_options::recursive);
  }
};

}  // namespace

TEST_CASE("docs: every internal link and anchor resolves, every source file a page names exists", "[docs]") {
  std::string broken;
  for (const auto& p : pages()) {
    for (const auto& b : broken_links(p)) broken += b + "\n";
    for (const auto& b : missing_sources(p)) broken += b + "\n";
  }
  CHECK(broken == "");
  // The checks can fail: a planted broken anchor, file and source name are each found, with their line.
  TempDir planted;
  const fs::path page = planted.write("docs/x.md", "# Title\n\n## Real part\n\nsee [a](#real-part), [b](#no-such), [c](y.md),\n"
                                                   "and `engine/no_such_file`.\n");
  planted.write("docs/z.md", "x");
  const auto links = broken_links(page);
  REQUIRE(links.size() == 2);
  CHECK(links[0].find(":5: (#no-such): no heading makes #no-such") != std::string::npos);
  CHECK(links[1].find("(y.md): no such file") != std::string::npos);
  const auto sources = missing_sources(page);
  REQUIRE(sources.size() == 1);
  CHECK(sources[0].find(":6: `engine/no_such_file` names no file") != std::string::npos);
  CHECK(slug("Nothing built twice: caches (scoped) by `trust`") == "nothing-built-twice-caches-scoped-by-trust");
}

TEST_CASE("docs: the runnable shell blocks of on-call, maintainers and operators run as the pages say on an installed host, and a planted wrong command fails with its page and line", "[docs]") {
  InstalledHost host;
  std::vector<RunnableLine> lines;
  for (const char* page : {"docs/on-call.md", "docs/maintainers.md", "docs/operators.md"}) {
    const auto found = runnable_lines(kSource / page);
    INFO(page);
    CHECK_FALSE(found.empty());  // each page keeps at least one block under test
    lines.insert(lines.end(), found.begin(), found.end());
  }
  std::string failures;
  for (const auto& f : run_lines(lines, host.config, host.elsewhere, host.clone)) failures += f + "\n";
  CHECK(failures == "");
  // What the blocks did is what the daemon shows: on-call's drain and undrain of card 3 reached it.
  const auto st = host.s.get(pto::api_path::kStatus);
  bool three = false;
  for (const auto& d : st["devices"])
    if (d["id"] == 3) three = d["state"] == "free" || d["state"] == "busy";
  CHECK(three);

  // A page whose command is wrong fails, naming the page and the line.
  TempDir planted;
  const fs::path page = planted.write("on-call.md", "# x\n\n<!-- runnable -->\n```sh\npto-runner status\npto-runner devices --drain 99\n```\n");
  const auto wrong = run_lines(runnable_lines(page), host.config, host.elsewhere, host.clone);
  REQUIRE(wrong.size() == 1);
  CHECK(wrong[0].find("on-call.md:6: `pto-runner devices --drain 99` exited 2, the page says 0") != std::string::npos);
}
