// RunHistory's group commit: the step transitions and learned durations of one turn of the daemon's loop
// share one transaction of the journal's connection. It is committed when the turn ends (a posted handler), or
// earlier by durable(), which whatever lets a transition's consequence leave the daemon calls first: a step's
// processes starting or being signalled, an answer going out, another connection writing the file, any other
// write of the journal. So what the fourth stage promised holds: nothing outside the daemon follows from a
// transition that a SIGKILL could still lose. In a turn where a step ends and the next one starts on its cards,
// both transitions are one commit instead of two, and a run's start queues its steps in one.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "store/run_history.h"
#include "store/side_table.h"

namespace pto {

void RunHistory::group_commits(boost::asio::io_context& io) {
  group_io_ = &io;
  group_thread_ = std::this_thread::get_id();
  // Another store's write on this thread commits the group first (it would wait for it on its busy timeout).
  outer_side_write_hook_ = before_side_write();
  before_side_write() = [this, outer = outer_side_write_hook_] {
    durable();
    if (outer) outer();
  };
}

void RunHistory::stop_grouping() {
  if (!group_io_) return;
  durable();
  if (std::this_thread::get_id() == group_thread_) before_side_write() = outer_side_write_hook_;
  group_io_ = nullptr;
}

bool RunHistory::grouped(const std::string& run, const std::function<bool()>& f) {
  if (std::this_thread::get_id() != group_thread_ || !group_io_ || !journal_) return false;
  if (!group_open_) {
    if (!journal_->begin_group()) return false;
    group_open_ = true;
    if (!group_posted_) {
      group_posted_ = true;
      boost::asio::post(*group_io_, [this, alive = std::weak_ptr<int>(group_alive_)] {
        if (alive.expired()) return;  // the history went first (its destructor committed)
        group_posted_ = false;
        durable();
      });
    }
  }
  if (!run.empty()) group_runs_.insert(run);
  const bool ok = f();
  if (group_open_ && journal_->group_lost()) group_failed();  // SQLite rolled the whole group back
  else if (!ok) journal_result(false, run);
  return true;
}

bool RunHistory::grouping() const { return group_io_ && journal_ && std::this_thread::get_id() == group_thread_; }

void RunHistory::durable() {
  // Another thread (an answer sent from a worker) has nothing of its own open, and must not read the group.
  if (std::this_thread::get_id() != group_thread_ || !group_io_ || !group_open_) return;
  if (before_commit_) before_commit_();  // what was left to the commit, into the group
  if (!group_open_) return;              // it lost the group (group_failed)
  if (!journal_->commit_group()) return group_failed();
  group_open_ = false;
  group_runs_.clear();
  journal_result(true, "");
}

void RunHistory::group_failed() {
  if (!group_open_) return;
  group_open_ = false;
  const std::set<std::string> runs = std::move(group_runs_);
  group_runs_.clear();
  journal_result(false, "");
  for (const std::string& run : runs) {
    // What the engine state remembers having written is not there.
    if (engine_state_) engine_state_->forget_written(run);
    journal_result(false, run);
  }
}

}  // namespace pto
