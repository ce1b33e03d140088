// Shutdown (hosting/shutdown): how the daemon stops, driven with a quiet flag the test sets and the io_context's
// own timers: a drain ends once quiet, waits for a run's client to read its end, and past its bound hands over
// to a cancel; a cancel ends with the signal's code; refusals say which.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>

#include <chrono>

#include "hosting/shutdown.h"

using namespace pto;

namespace {

struct Stopping {
  boost::asio::io_context io;
  bool quiet = false;
  int closed = 0;
  std::optional<int> done;
  Shutdown stop{io, [this] { return quiet; }, [this] { ++closed; }};
  std::function<void(int)> on_done() {
    return [this](int code) { done = code; };
  }
  void turn(double seconds = 0.05) {
    io.restart();
    io.run_for(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(seconds)));
  }
};

}  // namespace

TEST_CASE("shutdown: a drain ends with 0 once quiet, and refuses new work as draining meanwhile", "[shutdown]") {
  Stopping s;
  bool expired = false;
  REQUIRE(s.stop.begin_drain(s.on_done(), 3600, [&] { expired = true; }));
  CHECK_FALSE(s.stop.begin_drain(s.on_done(), 3600, [] {}));  // once
  CHECK(s.stop.refusal().outcome == Outcome::Unavailable);
  CHECK(s.stop.refusal().body["error"].get<std::string>().find("draining (SIGTERM)") != std::string::npos);
  s.stop.check();
  s.turn();
  CHECK_FALSE(s.done);  // runs still active
  s.quiet = true;
  s.stop.check();
  s.turn();
  REQUIRE(s.done);
  CHECK(*s.done == 0);
  CHECK(s.closed == 1);
  CHECK_FALSE(expired);
}

TEST_CASE("shutdown: a run that ended during a drain keeps the daemon answering until its client read it, then 2 s more",
          "[shutdown]") {
  Stopping s;
  REQUIRE(s.stop.begin_drain(s.on_done(), 3600, [] {}));
  s.stop.run_finished("r1");
  s.quiet = true;
  s.stop.check();
  s.turn(0.2);
  CHECK_FALSE(s.done);  // its client has not read its end
  s.stop.run_read("r1");
  s.stop.check();
  s.turn(0.2);
  CHECK_FALSE(s.done);  // the answer is on its way: lingering
  s.turn(2.5);
  REQUIRE(s.done);
  CHECK(*s.done == 0);
}

TEST_CASE("shutdown: a drain past its bound hands over to the cancel, which ends with the signal's code", "[shutdown]") {
  Stopping s;
  bool expired = false;
  REQUIRE(s.stop.begin_drain(s.on_done(), 0.05, [&] {
    expired = true;
    s.stop.begin_cancel(143, nullptr);
  }));
  s.stop.run_finished("r1");  // a cancel does not wait for readers
  s.turn(0.3);
  REQUIRE(expired);
  CHECK(s.stop.cancelling());
  CHECK_FALSE(s.done);  // still active
  s.quiet = true;
  s.stop.check();
  s.turn();
  REQUIRE(s.done);
  CHECK(*s.done == 143);
}

TEST_CASE("shutdown: SIGINT cancels at once, a later SIGTERM changes nothing but who is told", "[shutdown]") {
  Stopping s;
  REQUIRE(s.stop.begin_cancel(130, s.on_done()));
  CHECK(s.stop.refusal().body["error"].get<std::string>().find("stopping (SIGINT)") != std::string::npos);
  std::optional<int> second;
  CHECK_FALSE(s.stop.begin_cancel(143, [&](int code) { second = code; }));
  CHECK_FALSE(s.stop.begin_drain(s.on_done(), 1, [] {}));
  s.quiet = true;
  s.stop.check();
  s.turn();
  CHECK_FALSE(s.done);
  REQUIRE(second);
  CHECK(*second == 130);  // the first signal's code
  CHECK(s.closed == 1);
}
