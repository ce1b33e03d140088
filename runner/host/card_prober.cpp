#include "host/card_prober.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdlib>
#include <limits>

#include "exec/executor.h"
#include "exec/process_marker.h"
#include "sched/device_pool.h"
#include "util/steady_seconds.h"

namespace pto {

struct CardProber::Timer {
  explicit Timer(boost::asio::io_context& io) : t(io) {}
  boost::asio::steady_timer t;
};

CardProber::CardProber(boost::asio::io_context& io, DevicePool& pool, Executor& executor, HealthConfig health, std::string log_dir,
                       std::function<void(int, const std::string&, double, const std::string&)> on_probe, std::function<void(int)> on_returned)
    : io_(io),
      pool_(pool),
      executor_(executor),
      health_(std::move(health)),
      log_dir_(std::move(log_dir)),
      on_probe_(std::move(on_probe)),
      on_returned_(std::move(on_returned)),
      timer_(std::make_unique<Timer>(io)) {}

CardProber::~CardProber() = default;

void CardProber::start() { tick(); }

void CardProber::tick() {
  for (int card : pool_.idle_bad_cards())
    if (!probing_.count(card) && !health_.check.empty()) probe(card);
  timer_->t.expires_after(std::chrono::milliseconds(static_cast<long long>(health_.probe_interval_seconds * 1000)));
  timer_->t.async_wait([this](boost::system::error_code ec) {
    if (!ec) tick();
  });
}

void CardProber::probe(int card) {
  std::string why;
  if (!pool_.acquire({card}, "health probe of card " + std::to_string(card), std::numeric_limits<double>::infinity(), why)) return;
  probing_.insert(card);
  pool_.probe_started(card);
  auto check = [this, card] {
    run(card, health_.check, [this, card](bool passed) {
      pool_.release({card});
      probing_.erase(card);
      if (pool_.probe_ended(card, passed)) {
        reset_done_.erase(card);
        if (on_returned_) on_returned_(card);
      }
    });
  };
  // The reset once per bad spell, while the card is idle; its failure is reported, and the check still says.
  if (!health_.reset.empty() && !reset_done_.count(card)) {
    reset_done_.insert(card);
    run(card, health_.reset, [check](bool) { check(); });
  } else {
    check();
  }
}

void CardProber::run(int card, const std::string& command, std::function<void(bool)> done) {
  const std::string cmd = for_card(command, card);
  StepLaunch l;
  l.label = "health probe of card " + std::to_string(card);
  l.command = cmd;
  l.shell = "sh";
  l.working_directory = "/";
  const char* path = std::getenv("PATH");  // the daemon's own: a probe is root's command, not a run's
  l.env = {std::string("PATH=") + (path ? path : "/usr/sbin:/usr/bin:/sbin:/bin"), "TASK_DEVICE=" + std::to_string(card),
           "DEVICE_ID=" + std::to_string(card)};
  l.log_path = log_dir_ + "/probe-card-" + std::to_string(card) + ".log";
  l.marker = ProcessMarker::for_health_check("probe", card, ++count_).text();
  l.timeout_seconds = health_.check_timeout_seconds;
  l.grace_seconds = 5;
  const double began = steady_seconds();
  executor_.start(std::move(l), [this, card, cmd, began, done = std::move(done)](const StepOutcome& o) {
    if (on_probe_ && !o.cancelled) on_probe_(card, cmd, steady_seconds() - began, o.failure());
    done(o.ok());
  });
}

}  // namespace pto
