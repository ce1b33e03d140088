// The local executor: each step is `bash -e -o pipefail -c RUN` in its own process group, its merged
// stdout/stderr read through a pipe into the step's log file and, line by line, to the console.
//
// Ending a step, whatever the cause, is one sequence: SIGTERM to the group (on timeout or cancel), SIGKILL
// to the group after the grace period, then SIGKILL to what is left: with cgroups (exec/cgroup_tree) through
// the step's cgroup.kill and a wait for it to empty, otherwise to every process still carrying the step's
// marker (the setsid escapees); then wait for the output pipe to close. Only then is `done` called, so the
// engine never releases a card while a process of the step is still alive. Processes start in
// exec/spawn_process.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/process/v2.hpp>
#include <array>
#include <cstdio>
#include <cstring>
#include <optional>
#include <map>
#include <utility>

#include "exec/card_access.h"
#include "exec/cgroup_tree.h"
#include "exec/child_reaper.h"
#include "exec/executor.h"
#include "exec/process_sweep.h"
#include "exec/spawn_process.h"
#include "exec/spawner.h"
#include "util/secret_mask.h"
#include "util/clock.h"

namespace asio = boost::asio;
namespace bp = boost::process::v2;

namespace pto {

namespace {

class LocalExecutor;

class StepProcess : public std::enable_shared_from_this<StepProcess> {
 public:
  StepProcess(asio::io_context& io, asio::thread_pool& sweepers, Spawner* spawner, StepLaunch launch,
              std::function<void(const StepOutcome&)> done, std::function<void()> on_finished)
      : io_(io),
        sweepers_(sweepers),
        launch_(std::move(launch)),
        done_(std::move(done)),
        on_finished_(std::move(on_finished)),
        pipe_(io),
        timeout_(io),
        grace_(io),
        eof_wait_(io),
        cgroup_wait_(io),
        spawner_(spawner) {}

  void start() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return fail_to_start(std::string("pipe: ") + std::strerror(errno));
    pipe_.assign(fds[0]);
    const char* exe = launch_.shell == "sh" ? "/bin/sh" : "/bin/bash";
    std::vector<std::string> argv = {exe, "-e"};
    if (launch_.shell != "sh") argv.insert(argv.end(), {"-o", "pipefail"});
    argv.insert(argv.end(), {"-c", launch_.command});
    std::vector<std::string> env = launch_.env;
    env.push_back(std::string(kStepMarkVar) + "=" + launch_.marker);
    int err = 0;
    cgroup_ = CgroupTree::instance().make_child();
    const std::string cwd = launch_.working_directory.empty() ? "." : launch_.working_directory;
    SpawnSpec spec{argv, env, cwd, fds[1], cgroup_};
    spec.run_as = launch_.run_as;
    if (launch_.limits.any()) {
      limits_ = StepLimits::make(launch_.limits, cgroup_);
      spec.also_join = limits_->join();
      // No pids controller here: its own uid per run makes RLIMIT_NPROC the run's process cap.
      if (launch_.run_as && launch_.limits.pids_max && limits_->unplaced().find("pids-max") != std::string::npos)
        spec.max_processes = launch_.limits.pids_max;
    }
    // Its cards' files are its user's to open while it runs (and no other card's).
    if (launch_.run_as && !launch_.card_files.empty())
      if (std::string e = grant_file_access(launch_.card_files, launch_.run_as->uid); !e.empty()) {
        revoke_cards();  // what was granted before the failing file
        ::close(fds[1]);
        CgroupTree::instance().recycle(cgroup_);
        cgroup_.clear();
        return fail_to_start("cannot give the step its cards' files: " + e);
      }
    // Started by the spawner process where there is one (the answer comes on the io_context once the child
    // exec'd: this thread goes on meanwhile), in-process otherwise.
    auto self = shared_from_this();
    if (spawner_ && spawner_->spawn(spec, [self](pid_t pid, int error) { self->started(pid, error); })) {
      ::close(fds[1]);
      return;
    }
    pid_t pid = -1;
    {
      // Registered before the orphan reaper can look: it never waits for a child someone owns.
      std::lock_guard<std::mutex> g(owned_children::lock());
      pid = spawn_process(spec, err);
      if (pid > 0) owned_children::add(pid);
    }
    ::close(fds[1]);
    started(pid, err);
  }

  void cancel() { terminate(false); }

 private:
  void started(pid_t pid, int err) {
    if (pid < 0) {
      // EPIPE: the spawner went away with this request; whatever it may have started is in the step's cgroup.
      if (err == EPIPE && !cgroup_.empty()) CgroupTree::signal_all(cgroup_, SIGKILL);
      CgroupTree::instance().recycle(cgroup_);
      cgroup_.clear();
      revoke_cards();
      return fail_to_start("cannot start " + std::string(launch_.shell == "sh" ? "/bin/sh" : "/bin/bash") + " in '" +
                           launch_.working_directory + "'" + (launch_.run_as ? " as " + launch_.run_as->name : "") + ": " +
                           std::strerror(err));
    }
    process_.emplace(io_.get_executor(), pid);
    pgid_ = process_->id();
    outcome_.pid = pgid_;
    read_output();
    auto self = shared_from_this();
    process_->async_wait([self](bp::error_code, int) { self->on_exit(); });
    if (cancel_asked_) return terminate(false);  // cancelled while the spawner was starting it
    if (launch_.timeout_seconds > 0) {
      timeout_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(launch_.timeout_seconds)));
      timeout_.async_wait([self](bp::error_code ec) {
        if (!ec) self->terminate(/*timed_out=*/true);
      });
    }
  }

  void fail_to_start(const std::string& why) {
    outcome_.error = why;
    exited_ = swept_ = pipe_eof_ = true;
    if (std::FILE* f = log()) std::fprintf(f, "pto-runner: %s\n", why.c_str());
    auto self = shared_from_this();
    asio::post(io_, [self] { self->finish(); });
  }

  void read_output() {
    auto self = shared_from_this();
    pipe_.async_read_some(asio::buffer(buf_), [self](bp::error_code ec, std::size_t n) {
      if (self->finished_) return;  // ended by the EOF timer: the log is closed and `done` was called
      if (n) self->consume(std::string_view(self->buf_.data(), n));
      if (ec) {
        self->pipe_eof_ = true;
        self->flush_partial_line();
        self->maybe_finish();
        return;
      }
      self->read_output();
    });
  }

  void consume(std::string_view data) {
    if (launch_.take_line && !taken_) {
      // Offered line by line until one is taken; declined lines are logged as they would have been.
      offered_.append(data);
      std::size_t start = 0, nl;
      while (!taken_ && (nl = offered_.find('\n', start)) != std::string::npos) {
        std::string_view line = std::string_view(offered_).substr(start, nl - start);
        if (launch_.take_line(line)) taken_ = true;
        else log_output(std::string_view(offered_).substr(start, nl + 1 - start));
        start = nl + 1;
      }
      std::string rest = offered_.substr(start);
      offered_.clear();
      if (!taken_ && rest.size() < 64 * 1024) {
        offered_ = std::move(rest);
        return;
      }
      taken_ = true;  // a line that never ends is output, not a placement
      if (!rest.empty()) log_output(rest);
      return;
    }
    log_output(data);
  }

  // With a mask, output goes out a whole line at a time, masked (a secret split across two reads is still
  // one line); a line that never ends is masked and written at 64 KiB, and what is left at the end.
  void log_output(std::string_view data) {
    if (!launch_.mask) return show_output(data);
    unmasked_.append(data);
    std::size_t start = 0, nl;
    while ((nl = unmasked_.find('\n', start)) != std::string::npos) {
      std::string line = launch_.mask->line(std::string_view(unmasked_).substr(start, nl - start));
      line += '\n';
      show_output(line);
      start = nl + 1;
    }
    unmasked_.erase(0, start);
    if (unmasked_.size() > 64 * 1024) show_output(launch_.mask->apply(std::exchange(unmasked_, {})));
  }

  void show_output(std::string_view data) {
    write_log(data);
    if (!data.empty()) log_ends_line_ = data.back() == '\n';
    if (!launch_.on_line) return;
    partial_.append(data);
    std::size_t start = 0, nl;
    while ((nl = partial_.find('\n', start)) != std::string::npos) {
      launch_.on_line(std::string_view(partial_).substr(start, nl - start));
      start = nl + 1;
    }
    partial_.erase(0, start);
    if (partial_.size() > 64 * 1024) {  // a line that never ends still reaches the console
      launch_.on_line(partial_);
      partial_.clear();
    }
  }

  void flush_partial_line() {
    if (!offered_.empty()) log_output(std::exchange(offered_, {}));
    if (!unmasked_.empty()) show_output(launch_.mask->apply(std::exchange(unmasked_, {})));
    if (launch_.on_line && !partial_.empty()) launch_.on_line(partial_);
    partial_.clear();
  }

  void terminate(bool timed_out) {
    if (exited_ || terminating_) return;
    if (!pgid_) {  // not started yet (the spawner has not answered): kill(-0) would be our own group
      cancel_asked_ = true;
      return;
    }
    terminating_ = true;
    (timed_out ? outcome_.timed_out : outcome_.cancelled) = true;
    if (std::FILE* f = log())
      std::fprintf(f, "\npto-runner: %s; SIGTERM to process group %d\n", timed_out ? "timed out" : "cancelled", pgid_);
    ::kill(-pgid_, SIGTERM);
    if (!cgroup_.empty()) CgroupTree::signal_all(cgroup_, SIGTERM);  // escapees of the group too
    auto self = shared_from_this();
    grace_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(launch_.grace_seconds)));
    grace_.async_wait([self](bp::error_code ec) {
      if (ec || self->exited_) return;
      if (std::FILE* f = self->log()) std::fprintf(f, "pto-runner: grace period over; SIGKILL\n");
      ::kill(-self->pgid_, SIGKILL);
      if (!self->cgroup_.empty()) CgroupTree::signal_all(self->cgroup_, SIGKILL);
    });
  }

  void on_exit() {
    exited_ = true;
    timeout_.cancel();
    grace_.cancel();
    int status = process_->native_exit_code();
    if (WIFEXITED(status)) outcome_.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) outcome_.signal = WTERMSIG(status);
    // Nothing of the step outlives it: the rest of its group, then what is left in its cgroup or, without
    // one, the escapees that carry its marker (a /proc scan on a worker, so the engine thread keeps
    // dispatching other steps meanwhile); the cards are released only after (finish() waits for swept_).
    ::kill(-pgid_, SIGKILL);
    owned_children::remove(pgid_);
    auto self = shared_from_this();
    // The pipe closes once the last writer is gone; an unmarked writer must not hold the step forever. (Armed
    // first: what follows may finish the step at once, and finish() cancels it.)
    eof_wait_.expires_after(std::chrono::seconds(2));
    eof_wait_.async_wait([self](bp::error_code ec) {
      if (!ec && !self->pipe_eof_) {
        self->pipe_eof_ = true;
        self->pipe_.close();
        self->maybe_finish();
      }
    });
    if (!cgroup_.empty()) {
      // Everything left in the step's cgroup, however it left the group or scrubbed its environment, is
      // killed at once; the step is over when the cgroup is empty. No /proc scan.
      const bool populated = CgroupTree::populated(cgroup_);
      int left = populated ? CgroupTree::signal_all(cgroup_, SIGKILL) : 0;
      if (left)
        if (std::FILE* f = log()) std::fprintf(f, "pto-runner: killed %d leftover process(es) of this step\n", left);
      // Found empty already (a step that left nothing behind, nearly all): not read again to be sure.
      wait_cgroup_empty(steady_now() + std::chrono::seconds(5), !populated);
    } else {
      asio::post(sweepers_, [self] {
        int swept = kill_marked_processes(self->launch_.marker, SIGKILL);
        asio::post(self->io_, [self, swept] {
          if (swept)
            if (std::FILE* f = self->log()) std::fprintf(f, "pto-runner: killed %d leftover process(es) of this step\n", swept);
          self->swept_ = true;
          self->maybe_finish();
        });
      });
    }
    maybe_finish();
  }

  /// The log file is created on the first byte written to it, not at start: a step that prints nothing and
  /// succeeds leaves no file. Creating an inode per step was over half of the runner's own CPU per step on
  /// ext4 (bench/README.md, dispatch overhead); the API serves a missing log of a started step as empty.
  std::FILE* log() {
    if (!log_ && !log_failed_) {
      log_ = std::fopen(launch_.log_path.c_str(), "abe");  // e: O_CLOEXEC
      log_failed_ = !log_;
      // Unbuffered: each chunk read from the step's pipe is one write, so the log API and `submit --follow`
      // see a running step's output as it comes, not 4 KiB or the step's end later.
      if (log_) std::setvbuf(log_, nullptr, _IONBF, 0);
    }
    return log_;
  }

  void wait_cgroup_empty(std::chrono::steady_clock::time_point deadline, bool known_empty = false) {
    const bool empty = known_empty || !CgroupTree::populated(cgroup_);
    const bool past = steady_now() > deadline;  // read once: both branches agree
    if (!empty && past) {
      // Still there 5 s after cgroup.kill: stuck in the kernel (a driver call in uninterruptible sleep). The
      // step ends; the run says the host has a problem, so the card gets its health check (as Slurm drains a
      // node whose step is unkillable).
      auto left = CgroupTree::processes(cgroup_);
      outcome_.survivors = std::to_string(left.size()) + " process(es) of the step outlived SIGKILL for 5 s in " + cgroup_;
      if (std::FILE* f = log()) std::fprintf(f, "pto-runner: %s\n", outcome_.survivors.c_str());
    }
    if (empty || past) {
      // Its processes were in this cgroup and the limits' v1 cgroups alike, and cannot leave either: this one
      // empty, so are those (they are not read again).
      if (empty && limits_) limits_->processes_gone();
      CgroupTree::instance().recycle(cgroup_, empty);  // removed instead when something is still in it
      cgroup_.clear();
      swept_ = true;
      maybe_finish();
      return;
    }
    auto self = shared_from_this();
    cgroup_wait_.expires_after(std::chrono::milliseconds(2));
    cgroup_wait_.async_wait([self, deadline](bp::error_code ec) {
      if (!ec) self->wait_cgroup_empty(deadline);
    });
  }

  // Up to the cap the log is written as it comes; past it, only the newest kLogTailBytes are kept (in memory)
  // and written after a line saying what was dropped, when the step ends.
  void write_log(std::string_view data) {
    const std::uint64_t cap = launch_.log_max_bytes;
    if (cap && logged_ + data.size() > cap - std::min(cap, kLogTailBytes)) {
      std::uint64_t head_room = cap - std::min(cap, kLogTailBytes);
      std::size_t fits = logged_ < head_room ? static_cast<std::size_t>(head_room - logged_) : 0;
      if (fits) write_file(data.substr(0, fits));
      tail_.append(data.substr(fits));
      dropped_ += data.size() - fits;
      if (tail_.size() > 2 * kLogTailBytes) tail_.erase(0, tail_.size() - kLogTailBytes);
      return;
    }
    write_file(data);
  }

  void write_file(std::string_view data) {
    std::FILE* f = log();
    if (!f) {
      if (outcome_.log_error.empty() && log_failed_) outcome_.log_error = "cannot create " + launch_.log_path + ": " + std::strerror(errno);
      return;
    }
    if (std::fwrite(data.data(), 1, data.size(), f) != data.size() && outcome_.log_error.empty())
      outcome_.log_error = "cannot write " + launch_.log_path + ": " + std::strerror(errno);
    logged_ += data.size();
  }

  void flush_tail() {
    if (tail_.empty()) return;
    if (tail_.size() > kLogTailBytes) tail_.erase(0, tail_.size() - kLogTailBytes);
    std::uint64_t shown = tail_.size();
    std::string marker = "\n[pto-runner: " + std::to_string(dropped_ - shown) + " bytes of output dropped here: the log is capped at " +
                         std::to_string(launch_.log_max_bytes) + " bytes (log-max-mb); the last " + std::to_string(shown) +
                         " follow]\n";
    write_file(marker);
    write_file(tail_);
    tail_.clear();
  }

  void maybe_finish() {
    if (exited_ && swept_ && pipe_eof_) finish();
  }

  void revoke_cards() {
    if (launch_.run_as && !launch_.card_files.empty()) revoke_file_access(launch_.card_files, launch_.run_as->uid);
  }

  void finish() {
    if (finished_) return;
    finished_ = true;
    eof_wait_.cancel();
    // Every process of it is gone (finish waits for that): its cards' files are closed to its user again, and
    // what it ran into said. The limit cgroups go with the step.
    revoke_cards();
    if (limits_) {
      if (std::string why = limits_->exceeded(); !why.empty()) {
        outcome_.limit_reached = why;
        if (std::FILE* f = log()) std::fprintf(f, "%spto-runner: %s\n", log_ends_line_ ? "" : "\n", why.c_str());
        log_ends_line_ = true;
      }
      limits_.reset();
    }
    flush_partial_line();  // what was held back for take_line or the console goes out before the log closes
    flush_tail();
    // A step that failed always leaves a log naming how it ended (the console and the API point at it).
    if (!outcome_.ok() && outcome_.error.empty())
      if (std::FILE* f = log()) {
        if (!log_ends_line_) std::fputc('\n', f);  // the trailer is a line of its own
        if (outcome_.signal) std::fprintf(f, "pto-runner: process ended by signal %d\n", outcome_.signal);
        else std::fprintf(f, "pto-runner: process completed with exit code %d\n", outcome_.exit_code);
      }
    if (log_ && std::fclose(log_) != 0 && outcome_.log_error.empty())
      outcome_.log_error = "cannot write " + launch_.log_path + ": " + std::strerror(errno);
    log_ = nullptr;
    auto done = std::move(done_);
    auto fin = std::move(on_finished_);
    if (fin) fin();
    if (done) done(outcome_);
  }

  asio::io_context& io_;
  asio::thread_pool& sweepers_;
  StepLaunch launch_;
  std::function<void(const StepOutcome&)> done_;
  std::function<void()> on_finished_;
  std::optional<bp::process> process_;
  asio::readable_pipe pipe_;
  asio::steady_timer timeout_, grace_, eof_wait_, cgroup_wait_;
  std::string cgroup_;  // this step's cgroup (exec/cgroup_tree), "" where containment is group + sweep
  std::unique_ptr<StepLimits> limits_;  // its pids-max and memory-max, when set
  std::array<char, 16384> buf_{};
  std::string partial_;
  std::string unmasked_;  // with a mask: output since the last newline
  std::FILE* log_ = nullptr;
  StepOutcome outcome_;
  int pgid_ = 0;
  bool log_failed_ = false;
  bool taken_ = false;     // take_line took its line (or gave up): the rest is output
  std::string offered_;    // output not yet offered to take_line (no newline yet)
  bool log_ends_line_ = true;
  std::uint64_t logged_ = 0, dropped_ = 0;
  std::string tail_;
  bool exited_ = false, swept_ = false, pipe_eof_ = false, terminating_ = false, finished_ = false;
  bool cancel_asked_ = false;
  Spawner* spawner_;  // null: spawned in-process
};

class LocalExecutor : public Executor {
 public:
  LocalExecutor(asio::io_context& io, Spawning spawning) : io_(io), sweepers_(2), spawning_(spawning) {}
  ~LocalExecutor() override {
    // Never leave a step's processes behind, even when the engine is torn down early.
    for (auto& [id, p] : running_) p->cancel();
    sweepers_.join();
  }

  std::uint64_t start(StepLaunch launch, std::function<void(const StepOutcome&)> done) override {
    std::uint64_t id = ++next_;
    if (spawning_ == Spawning::Spawner && !spawner_tried_) {
      // Started with the first step, not before: an executor that never starts one costs no process.
      spawner_tried_ = true;
      std::string why;
      spawner_ = Spawner::start(io_, Spawner::default_program(), why);
    }
    auto p = std::make_shared<StepProcess>(io_, sweepers_, spawner_.get(), std::move(launch), std::move(done),
                                           [this, id] { running_.erase(id); });
    running_[id] = p;
    p->start();
    return id;
  }

  void cancel(std::uint64_t handle) override {
    auto it = running_.find(handle);
    if (it != running_.end()) it->second->cancel();
  }

  std::size_t active() const override { return running_.size(); }

 private:
  asio::io_context& io_;
  asio::thread_pool sweepers_;  // /proc scans, off the engine thread
  std::map<std::uint64_t, std::shared_ptr<StepProcess>> running_;
  std::uint64_t next_ = 0;
  Spawning spawning_;
  bool spawner_tried_ = false;
  // Declared last, so gone first: it kills what it started for steps still waiting for their answer.
  std::unique_ptr<Spawner> spawner_;
};

}  // namespace

std::unique_ptr<Executor> make_local_executor(asio::io_context& io, Spawning spawning) {
  return std::make_unique<LocalExecutor>(io, spawning);
}

}  // namespace pto
