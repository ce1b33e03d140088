// Dispatcher: the host's queue in front of the pure scheduler and the pool's flock locks.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <set>

#include "host/dispatcher.h"
#include "util/clock.h"
#include "test_support.h"

using pto::test::TempDir;

namespace {

struct Host {
  TempDir dir;
  pto::RunnerConfig cfg;
  std::unique_ptr<pto::DevicePool> pool;
  boost::asio::io_context io;
  std::unique_ptr<pto::Dispatcher> dispatcher;

  explicit Host(std::vector<int> ids) {
    cfg.device_ids = std::move(ids);
    cfg.lock_dir = (dir.path() / "locks").string();
    pool = std::make_unique<pto::DevicePool>(cfg, (dir.path() / "state").string());
    REQUIRE(pool->init().empty());
    dispatcher = std::make_unique<pto::Dispatcher>(io, *pool);
  }
  /// Queues a request and returns where its cards go once granted.
  std::shared_ptr<std::vector<int>> request(int devices, const std::string& label, double expected) {
    auto got = std::make_shared<std::vector<int>>();
    dispatcher->request({devices, "", label, expected, 0}, [got](const std::vector<int>& c) { *got = c; },
                        [](const std::string&) {});
    return got;
  }
  void settle() {
    io.restart();
    io.poll();
  }
};

}  // namespace

TEST_CASE("dispatcher: a short step deep in the queue still backfills a reserved card", "[dispatch]") {
  // Card 0 runs a 100 s step; a 2-card step waits and reserves both cards. 200 one-card steps without an
  // estimate cannot use the free reserved card; step 203, expected to take 5 s, ends before the reservation
  // and takes it. It sits past the head the dispatcher first hands the scheduler, so this checks that the
  // scheduler is given the whole queue when the head was not enough.
  Host h({0, 1});
  auto first = h.request(1, "long", 100);
  h.settle();
  REQUIRE(first->size() == 1);
  auto pair = h.request(2, "pair", 60);
  std::vector<std::shared_ptr<std::vector<int>>> blocked;
  for (int i = 0; i < 200; ++i) blocked.push_back(h.request(1, "unknown " + std::to_string(i), 0));
  auto shortie = h.request(1, "short", 5);
  h.settle();
  CHECK(pair->empty());
  for (const auto& b : blocked) CHECK(b->empty());
  REQUIRE(shortie->size() == 1);
  CHECK(shortie->front() != first->front());
  auto q = h.dispatcher->queue();
  REQUIRE(q.size() == 201);
  CHECK(q.front().label == "pair");
  CHECK(q.front().reason.find("waiting for 2 cards") != std::string::npos);
  CHECK(h.dispatcher->reserved().size() == 2);
}

TEST_CASE("dispatcher: waiting reasons name the step that just took the cards, not a step starting now",
          "[dispatch]") {
  Host h({0, 1});
  auto a = h.request(1, "ci / a", 0);
  auto b = h.request(1, "ci / b", 0);
  auto pair = h.request(2, "ci / pair", 0);
  h.settle();
  REQUIRE(a->size() == 1);
  REQUIRE(b->size() == 1);
  CHECK(pair->empty());
  auto q = h.dispatcher->queue();
  REQUIRE(q.size() == 1);
  CHECK(q.front().reason.find("held by ci / a") != std::string::npos);
  CHECK(q.front().reason.find("held by ci / b") != std::string::npos);
  CHECK(q.front().reason.find("starting now") == std::string::npos);
  // Both cards come back: the pair gets them, in one group-less pool.
  h.dispatcher->release(*a);
  h.dispatcher->release(*b);
  h.settle();
  CHECK(*pair == std::vector<int>{0, 1});
  CHECK(h.dispatcher->queue().empty());
}

TEST_CASE("dispatcher: places kept from an earlier daemon come before every new one, and no new place takes a kept one's key",
          "[dispatch]") {
  // Steps a restarted daemon takes over are queued again with the places the last daemon gave them (here 5 and
  // 6, while this daemon has handed out 3 places); the requests made after that are newer and must be served
  // after them, never replace them (the 5th new place would have been a kept one's key).
  Host h({0});
  auto taken = h.request(1, "holds the card", 100);  // so that everything else waits
  h.settle();
  REQUIRE(taken->size() == 1);
  std::vector<std::string> order;
  auto queue = [&](const std::string& label, std::uint64_t place) {
    h.dispatcher->request({1, "", label, 0, place}, [&order, label](const std::vector<int>&) { order.push_back(label); },
                          [](const std::string&) {});
  };
  queue("kept 5", 5);
  queue("kept 6", 6);
  queue("new a", 0);
  queue("new b", 0);
  h.settle();
  CHECK(h.dispatcher->queue().size() == 4);  // none dropped as replaced
  for (int i = 0; i < 4; ++i) {
    h.dispatcher->release(i == 0 ? *taken : std::vector<int>{0});
    h.settle();
  }
  CHECK(order == std::vector<std::string>{"kept 5", "kept 6", "new a", "new b"});
}

TEST_CASE("dispatcher: a client asking again after its daemon went away takes its place by when it first asked, ahead of what "
          "was asked after that", "[dispatch]") {
  Host h({0});
  auto taken = h.request(1, "holds the card", 100);
  h.settle();
  REQUIRE(taken->size() == 1);
  std::vector<std::string> order;
  auto queue = [&](const std::string& label, std::uint64_t since_us) {
    pto::CardRequest r{1, "", label, 0, 0};
    r.since_us = since_us;
    h.dispatcher->request(std::move(r), [&order, label](const std::vector<int>&) { order.push_back(label); }, [](const std::string&) {});
  };
  const auto now_us = static_cast<std::uint64_t>(pto::epoch_now() * 1e6);
  queue("asked now", 0);
  queue("asked again, first an hour ago", now_us - 3600000000ull);
  queue("asked again, first a minute ago", now_us - 60000000ull);
  queue("asked again, as the one before", now_us - 60000000ull);  // the same moment: a place of its own
  h.settle();
  CHECK(h.dispatcher->queue().size() == 4);
  for (int i = 0; i < 4; ++i) {
    h.dispatcher->release(i == 0 ? *taken : std::vector<int>{0});
    h.settle();
  }
  CHECK(order == std::vector<std::string>{"asked again, first an hour ago", "asked again, first a minute ago", "asked again, as the one before",
                                          "asked now"});
}
