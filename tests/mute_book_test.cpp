// MuteBook (testcases/mute_book): the API's mutes changed only when they can be kept, runner.yml's not the
// API's to end, and runner.yml read again replacing its own while the API's stay.
#include <catch2/catch.hpp>

#include "testcases/mute_book.h"

using namespace pto;

namespace {
TestMute mute_of(const std::string& id, const std::string& until = "2099-12-31") {
  TestMute m;
  m.id = id;
  m.reason = "pypto#2396";
  m.until = until;
  return m;
}
}  // namespace

TEST_CASE("mute book: a mute is in force once kept, and a change that cannot be kept changes nothing", "[testcases]") {
  TestsConfig cfg;
  cfg.mute = {mute_of("tests/st/test_cfg.py::*")};
  std::vector<std::vector<TestMute>> kept;
  std::string refuse;  // what the keeper says: "" keeps
  MuteBook book(cfg, {}, [&](const std::vector<TestMute>& api) {
    if (refuse.empty()) kept.push_back(api);
    return refuse;
  });
  CHECK(book.muted("tests/st/test_cfg.py::test_a"));
  CHECK_FALSE(book.muted("tests/st/test_x.py::test_y"));

  const Answer ok = book.mute(mute_of("tests/st/test_x.py::*"), "alice");
  CHECK(ok.outcome == Outcome::Ok);
  REQUIRE(kept.size() == 1);
  CHECK(kept[0].size() == 1);
  CHECK(kept[0][0].by == "alice");
  REQUIRE(book.muted("tests/st/test_x.py::test_y"));
  CHECK(book.in_force() == 2);

  refuse = "disk full";
  const Answer lost = book.mute(mute_of("tests/st/test_z.py::*"), "bob");
  CHECK(lost.outcome == Outcome::Unavailable);
  CHECK(lost.body.dump().find("disk full") != std::string::npos);
  CHECK_FALSE(book.muted("tests/st/test_z.py::test_1"));  // not kept: not in force
  CHECK(book.unmute("tests/st/test_x.py::*", "bob").outcome == Outcome::Unavailable);
  CHECK(book.muted("tests/st/test_x.py::test_y"));  // still muted

  refuse.clear();
  CHECK(book.unmute("tests/st/test_cfg.py::*", "bob").outcome == Outcome::Conflict);  // runner.yml's
  CHECK(book.unmute("tests/st/none.py::*", "bob").outcome == Outcome::NotFound);
  CHECK(book.unmute("tests/st/test_x.py::*", "bob").outcome == Outcome::Ok);
  CHECK_FALSE(book.muted("tests/st/test_x.py::test_y"));
}

TEST_CASE("mute book: runner.yml read again replaces its mutes and limit, the API's stay", "[testcases]") {
  TestsConfig cfg;
  cfg.mute = {mute_of("a::*")};
  MuteBook book(cfg, {mute_of("b::*")}, [](const std::vector<TestMute>&) { return std::string(); });
  CHECK(book.muted("a::x"));
  CHECK(book.muted("b::x"));
  TestsConfig next;
  next.mute = {mute_of("c::*")};
  next.max_muted = 2;
  book.reconfigure(next);
  CHECK_FALSE(book.muted("a::x"));
  CHECK(book.muted("b::x"));
  CHECK(book.muted("c::x"));
  CHECK(book.mute(mute_of("d::*"), "x").outcome == Outcome::Conflict);  // the new limit of 2
  CHECK(book.unmute("a::*", "x").outcome == Outcome::NotFound);         // no longer runner.yml's either
}
