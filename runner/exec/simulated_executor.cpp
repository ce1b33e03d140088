// The simulated executor for `run --simulate`: every step is a timer of its expected duration (already
// multiplied by --time-scale). Cancel stops the timer. The engine, scheduler, locks and reports are the
// real ones; only the process is replaced.
#include <boost/asio.hpp>
#include <cstdio>
#include <map>

#include "exec/executor.h"

namespace asio = boost::asio;

namespace pto {

namespace {

class SimulatedExecutor : public Executor {
 public:
  explicit SimulatedExecutor(asio::io_context& io) : io_(io) {}

  std::uint64_t start(StepLaunch launch, std::function<void(const StepOutcome&)> done) override {
    std::uint64_t id = ++next_;
    auto& e = running_[id];
    e.timer = std::make_unique<asio::steady_timer>(io_);
    e.done = std::move(done);
    if (std::FILE* log = std::fopen(launch.log_path.c_str(), "ab")) {
      std::fprintf(log, "pto-runner --simulate: sleeping %.3f s instead of running:\n%s\n", launch.simulated_seconds,
                   launch.command.c_str());
      std::fclose(log);
    }
    e.timer->expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(launch.simulated_seconds)));
    e.timer->async_wait([this, id](boost::system::error_code ec) {
      auto it = running_.find(id);
      if (it == running_.end()) return;
      StepOutcome o;
      if (ec || it->second.cancelled) o.cancelled = true;
      else o.exit_code = 0;
      auto done = std::move(it->second.done);
      running_.erase(it);
      done(o);
    });
    return id;
  }

  void cancel(std::uint64_t handle) override {
    auto it = running_.find(handle);
    if (it == running_.end()) return;
    it->second.cancelled = true;
    it->second.timer->cancel();
  }

  std::size_t active() const override { return running_.size(); }

 private:
  struct Entry {
    std::unique_ptr<asio::steady_timer> timer;
    std::function<void(const StepOutcome&)> done;
    bool cancelled = false;
  };
  asio::io_context& io_;
  std::map<std::uint64_t, Entry> running_;
  std::uint64_t next_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_simulated_executor(asio::io_context& io) {
  return std::make_unique<SimulatedExecutor>(io);
}

}  // namespace pto
