// report/actions_output: escaping by GitHub's rules, and untrusted blocks that GitHub's command parser (the
// test double in gha_parser.h) never reads as commands.
#include <catch2/catch.hpp>

#include <cstdio>
#include <set>

#include "gha_parser.h"
#include "report/actions_output.h"
#include "test_support.h"

using namespace pto;
using namespace pto::test;

namespace {

std::string capture(const std::function<void(ActionsOutput&)>& write, bool github = true) {
  TempDir d;
  std::string path = (d.path() / "out").string();
  std::FILE* f = std::fopen(path.c_str(), "w");
  {
    ActionsOutput o(f, github);
    write(o);
  }
  std::fclose(f);
  return read_file(path);
}

const char* kHostile =
    "::error::x\n"
    "  ::endgroup::\n"
    "\t::warning file=a::w\n"
    "text ##[error]x\n"
    "##[set-output name=a;]b\n"
    "::add-mask::y\n"
    "::stop-commands::guess\n"
    "::guess::\n"
    "::error::after-guess\n"
    "a\rb::error::cr\r::error::after-cr\n"
    "no newline at the end ::error::z";

}  // namespace

TEST_CASE("escaping follows GitHub's rules for data and properties") {
  CHECK(escape_command_data("50% a\r\nb") == "50%25 a%0D%0Ab");
  CHECK(escape_command_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A");
  CHECK(workflow_command("error", {{"file", "jobs/a,b.yml"}, {"line", "3"}}, "bad: x\ny") ==
        "::error file=jobs/a%2Cb.yml,line=3::bad: x%0Ay\n");
}

TEST_CASE("the parser double accepts what GitHub's runner would") {
  auto c = accepted_commands(kHostile);
  std::set<std::string> names;
  for (const auto& x : c) names.insert(x.name);
  // Without protection, the hostile text injects commands (this is what the double must catch).
  CHECK(names.count("error"));
  CHECK(names.count("endgroup"));
  CHECK(names.count("add-mask"));
  CHECK(names.count("set-output"));
  // .NET's TrimStart() also trims Unicode whitespace: a no-break space or an ideographic space before `::`.
  CHECK(accepted_commands("\xc2\xa0::warning::nbsp\n").size() == 1);
  CHECK(accepted_commands("\xe3\x80\x80::notice::ideographic\n").size() == 1);
  CHECK(accepted_commands("x::notice::not at the start\n").empty());
}

TEST_CASE("an untrusted block injects nothing, only the runner's own commands remain") {
  std::string out = capture([](ActionsOutput& o) {
    o.group("step ::error::in-title\n##[error]t");
    o.text(kHostile);
    o.endgroup();
    o.command("error", {{"title", "job / step, failed"}}, "exit 1\n::error::x");
  });
  auto cmds = accepted_commands(out);
  std::vector<std::string> names;
  for (const auto& c : cmds) names.push_back(c.name);
  REQUIRE(names.size() == 5);
  CHECK(names[0] == "group");
  CHECK(names[1] == "stop-commands");
  CHECK(names[2] == cmds[1].data);  // resumed by its own token only
  CHECK(names[3] == "endgroup");
  CHECK(names[4] == "error");
  CHECK(cmds[4].data == "exit 1%0A::error::x");
  // Every byte of the block is still shown.
  CHECK(out.find("no newline at the end ::error::z\n::") != std::string::npos);
}

TEST_CASE("each block gets a fresh token") {
  std::string out = capture([](ActionsOutput& o) {
    o.text("a\n");
    o.text("b\n");
  });
  auto cmds = accepted_commands(out);
  REQUIRE(cmds.size() == 4);
  CHECK(cmds[0].data != cmds[2].data);
  CHECK(cmds[0].data.size() == 32);
}

TEST_CASE("outside Actions text is printed as it is and commands are dropped") {
  std::string out = capture([](ActionsOutput& o) {
    o.text("::error::x");
    o.command("error", {}, "y");
  }, false);
  CHECK(out == "::error::x\n");
}
