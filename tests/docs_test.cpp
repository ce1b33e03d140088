// The documentation (docs/, mkdocs.yml, the README) as a newcomer uses it: the site builds strictly with
// Debian's mkdocs (a broken link fails it), every page is in the nav, the README's two commands are the
// scripts CI and the demo run, and every command a page shows in a shell block is one pto-runner has, with
// flags it takes.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "test_support.h"

using namespace pto::test;

namespace {

/// The .md pages the nav names, however deep.
void nav_pages(const YAML::Node& n, std::set<std::string>& out) {
  if (n.IsScalar()) {
    if (n.Scalar().size() > 3 && n.Scalar().substr(n.Scalar().size() - 3) == ".md") out.insert(n.Scalar());
  } else if (n.IsSequence()) {
    for (const auto& item : n) nav_pages(item, out);
  } else if (n.IsMap()) {
    for (const auto& kv : n) nav_pages(kv.second, out);
  }
}

/// The lines of every ```sh block of a Markdown text, comments and blank lines dropped.
std::vector<std::string> shell_lines(const std::string& md) {
  std::vector<std::string> out;
  std::istringstream in(md);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      inside = !inside && line == "```sh";
      continue;
    }
    if (!inside) continue;
    if (auto hash = line.find(" #"); hash != std::string::npos) line.erase(hash);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<fs::path> pages() {
  std::vector<fs::path> out = {source_dir() / "README.md"};
  for (const auto& e : fs::directory_iterator(source_dir() / "docs"))
    if (e.path().extension() == ".md") out.push_back(e.path());
  return out;
}

}  // namespace

TEST_CASE("docs: mkdocs build --strict builds the site, and every page under docs/ is in mkdocs.yml's nav", "[docs]") {
  REQUIRE(have("mkdocs"));  // scripts/install-deps.sh installs Debian's mkdocs
  TempDir out;
  std::string log;
  const int rc = sh("cd " + source_dir().string() + " && mkdocs build --strict -f mkdocs.yml -d " + (out.path() / "site").string() +
                        " 2>&1",
                    &log);
  INFO(log);
  CHECK(rc == 0);
  CHECK(fs::exists(out.path() / "site" / "architecture" / "index.html"));

  std::set<std::string> in_nav, on_disk;
  nav_pages(YAML::LoadFile((source_dir() / "mkdocs.yml").string())["nav"], in_nav);
  for (const auto& e : fs::directory_iterator(source_dir() / "docs"))
    if (e.path().extension() == ".md") on_disk.insert(e.path().filename().string());
  CHECK(in_nav == on_disk);
}

TEST_CASE("docs: the README's two commands are the scripts the demo and CI run, and each page's shell commands exist with "
          "the flags they show",
          "[docs]") {
  // The two commands, in the README and on the site's first page, in that order.
  for (const char* page : {"README.md", "docs/index.md"}) {
    const std::vector<std::string> lines = shell_lines(read_file(source_dir() / page));
    INFO(page);
    REQUIRE(lines.size() >= 2);
    CHECK(words_of(lines[0])[0] == "scripts/demo.sh");
    CHECK(words_of(lines[1])[0] == "scripts/test.sh");
  }
  CHECK(read_file(source_dir() / ".ci" / "run").find("scripts/test.sh") != std::string::npos);
  CHECK(read_file(source_dir() / "scripts" / "test.sh").find("ctest") != std::string::npos);

  int checked = 0;
  for (const fs::path& page : pages()) {
    for (const std::string& line : shell_lines(read_file(page))) {
      std::vector<std::string> w = words_of(line);
      INFO(page.filename().string() << ": " << line);
      if (w[0].rfind("scripts/", 0) == 0) {
        struct stat st {};
        CHECK(::stat((source_dir() / w[0]).c_str(), &st) == 0);
        CHECK((st.st_mode & S_IXUSR) != 0);
        ++checked;
        continue;
      }
      if (w[0] != "pto-runner") continue;
      // The command is the words before the first option; its --help lists every option the line gives.
      std::vector<std::string> help = {};
      std::size_t i = 1;
      for (; i < w.size() && w[i].rfind("-", 0) != 0; ++i) help.push_back(w[i]);
      help.push_back("--help");
      CommandResult r = run_cli(help);
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);
      for (; i < w.size(); ++i)
        if (w[i].rfind("--", 0) == 0) CHECK(r.out.find(w[i].substr(0, w[i].find('='))) != std::string::npos);
      ++checked;
    }
  }
  CHECK(checked >= 12);
}
