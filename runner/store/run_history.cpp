#include "store/run_history.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include <spdlog/spdlog.h>

#include "engine/engine_options.h"
#include "exec/process_marker.h"
#include "exec/process_sweep.h"
#include "source/git_mirror.h"
#include "util/exit_code.h"
#include "util/ids.h"
#include "util/iso_time.h"
#include "util/json_text.h"
#include "util/regular_file.h"
#include "util/state_paths.h"
#include "util/clock.h"

namespace fs = std::filesystem;

namespace pto {

RunOverview overview_of_finished(const nlohmann::json& record) {
  RunOverview o;
  o.id = record.value("id", "");
  o.state = record.value("state", "");
  o.created = record.value("created", "");
  o.finished = record.contains("finished") && record["finished"].is_string() ? record["finished"].get<std::string>() : "";
  o.result = record.contains("result") && record["result"].is_number_integer() ? record["result"].get<int>() : -1;
  o.request = record.value("request", nlohmann::json::object());
  if (o.request.is_object()) {
    o.sha = o.request.value("sha", "");
    o.ref = o.request.value("ref", "");
    if (o.request.contains("github") && o.request["github"].is_object() && o.request["github"].contains("run_url"))
      o.github_run = o.request["github"]["run_url"].get<std::string>();
  }
  return o;
}

RunHistory::RunHistory(std::string state_dir, ReadModel& model, boost::asio::thread_pool& removals, GitMirror* mirror,
                       std::function<void(const std::string&, const std::string&)> on_write_failed)
    : state_dir_(std::move(state_dir)),
      model_(model),
      removals_(removals),
      mirror_(mirror),
      on_write_failed_(std::move(on_write_failed)) {
  model_.state_dir = state_dir_;
}

std::string RunHistory::open(bool rebuild_requested) {
  const std::string path = journal_file(state_dir_);
  const std::string how = "; move it aside and start with `pto-runner serve --rebuild-journal` (same --root/--state-dir) "
                          "to rebuild the history from the run directories";
  if (rebuild_requested && fs::exists(path)) {
    // The damaged file is kept beside, never deleted: an operator may want to look at it.
    const std::string aside = path + ".damaged-" + new_run_id();
    std::error_code ec;
    fs::rename(path, aside, ec);
    if (ec) return "cannot move the journal " + path + " aside: " + ec.message();
    for (const char* suffix : {"-wal", "-shm"}) fs::rename(path + suffix, aside + suffix, ec);
    spdlog::warn("journal {} moved aside to {} for --rebuild-journal", path, aside);
  }
  std::string error;
  journal_ = Journal::open(path, error);
  if (!journal_) return "the journal " + path + " cannot be used (" + error + ")" + how;
  if (std::string bad = journal_->check_integrity(); !bad.empty()) {
    journal_.reset();
    return "the journal " + path + " is damaged (" + bad + ")" + how;
  }
  // The engine state shares the file; without it runs go on, and are interrupted by a restart as before.
  engine_state_ = EngineStateJournal::on(journal_->connection(), error);
  if (!engine_state_) spdlog::error("{}: runs cannot be taken over by the next daemon", error);
  // The test history shares the file; without it runs go on (their records keep their tests).
  tests_ = TestHistory::open(path, error);
  if (tests_) test_mutes_ = TestHistory::open(path, error);
  if (!tests_ || !test_mutes_) {
    spdlog::error("{}: test history is not kept until the daemon restarts", error);
    tests_.reset(), test_mutes_.reset();
  } else {
    tests_writer_ = std::make_unique<boost::asio::thread_pool>(1);
  }
  // A journal that is new or empty while run directories hold records (deleted, truncated to 0 bytes, or
  // --rebuild-journal): rebuild, loudly, rather than start with a silently empty history.
  bool have_records = false;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runs_dir(state_dir_), ec))
    if (fs::exists(run_record(e.path().string()))) {
      have_records = true;
      break;
    }
  if (have_records && (rebuild_requested || journal_->run_count() == 0)) {
    std::size_t n = rebuild();
    spdlog::warn("journal {} {}: rebuilt {} run(s) from the run directories' run.json", path,
                 rebuild_requested ? "rebuilt on request" : "was empty while run directories exist", n);
  }
  return "";
}

std::size_t RunHistory::rebuild() {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runs_dir(state_dir_), ec)) {
    std::string text, error;
    if (!read_regular_file(run_record(e.path().string()), 64 << 20, text, error)) continue;
    auto record = nlohmann::json::parse(text, nullptr, false);
    if (record.is_discarded() || !record.is_object() || record.value("id", "") != e.path().filename().string()) continue;
    // A run that never finished: as recovery would have left it.
    if (record.value("state", "") == "running") {
      record["state"] = "interrupted";
      record["result"] = to_int(ExitCode::Infrastructure);
      if (!record.contains("finished") || record["finished"].is_null()) record["finished"] = iso_now();
      write_record(record["id"], record);  // GETs read run.json: it says so too
    }
    if (journal_->restore_run(record)) ++n;
    else throw std::runtime_error("cannot write the rebuilt journal: " + journal_->write_error());
  }
  return n;
}

// After a crash: every run the journal never saw finish is marked interrupted. Its running steps become
// `interrupted` and their processes (found by the run's marker prefix) are killed; its waiting and pending
// steps become `cancelled`. Runs are not resumed: a resubmission is an explicit decision (GitHub re-run).
// Cards need nothing: the dead daemon's flocks died with it.
void RunHistory::recover(const std::set<std::string>& adopted) {
  for (auto run : journal_->unfinished_runs()) {
    std::string id = run.value("id", "");
    if (id.empty() || adopted.count(id)) continue;
    // Its steps as they last changed (kept with the engine's state in place of events), then nothing of it is
    // left to take over.
    if (engine_state_) {
      engine_state_->apply_views(id, run);
      engine_state_->drop(id);
    }
    int killed = 0;
    for (int pid : find_processes_with_mark_prefix(ProcessMarker::run_prefix(id)))
      if (::kill(pid, SIGKILL) == 0) ++killed;
    std::string now = iso_now();
    for (auto& job : run["jobs"]) {
      for (auto& step : job["steps"]) {
        std::string st = step.value("state", "pending");
        if (st == "running") step["state"] = "interrupted";
        else if (st == "waiting" || st == "pending") step["state"] = "cancelled";
        else continue;
        step["finished"] = now;
      }
      std::string js = job.value("state", "pending");
      if (js == "running" || js == "pending") {
        job["state"] = "cancelled";
        job["reason"] = "the daemon stopped while this run was active";
        job["finished"] = now;
      }
    }
    run["state"] = "interrupted";
    run["finished"] = now;
    run["result"] = to_int(ExitCode::Infrastructure);
    run["recovered"] = {{"at", now}, {"processes_killed", killed}};
    const std::string text = dump_json(run);
    journal_->run_finished(id, "interrupted", to_int(ExitCode::Infrastructure), run, text);
    write_record(id, run, text);  // its run.json says so too: a GET of it reads that
    spdlog::warn("recovered run {}: it was active when the daemon stopped; marked interrupted, {} leftover process(es) killed",
                 id, killed);
  }
}

void RunHistory::load() {
  model_.cards = CardHistory{};
  for (auto& [card, data] : journal_->card_events(epoch_now() - CardHistory::kWindowSeconds))
    if (auto e = CardEvent::from_json(card, data)) model_.cards.add(std::move(*e));
  // On the writer's thread, as every use of its connection (a prune at start may be running there now: one
  // SQLite connection used by two threads at once can leave a transaction open and lock everyone else out).
  if (tests_ && tests_writer_) {
    boost::asio::post(*tests_writer_, [this, since = epoch_now() - model_.tests_window_days * TestHistory::kDay] {
      tests_flaky_ = tests_->flaky_since(since);
    });
  } else if (tests_) {
    tests_flaky_ = tests_->flaky_since(epoch_now() - model_.tests_window_days * TestHistory::kDay);
  }
  model_.host.recent.clear();
  for (const auto& s : journal_->list_runs(static_cast<int>(kRecentRuns))) {
    if (s.state == "running") continue;
    // A GET of a finished run reads its run.json, never the journal: a run without one (older than run.json,
    // or whose record could not be written) gets it now, from the journal.
    // (A run whose directory is gone altogether, its logs with it, gets none: it is listed, and its record
    // cannot be read.)
    std::error_code ec;
    const std::string dir = run_dir(state_dir_, s.id);
    if (fs::is_directory(dir, ec) && !fs::exists(run_record(dir), ec))
      if (auto record = journal_->run_record(s.id)) write_record(s.id, *record);
    nlohmann::json rec = {{"id", s.id}, {"state", s.state}, {"created", s.created}, {"finished", s.finished},
                          {"result", s.result}, {"request", s.request}};
    model_.host.recent.push_back(overview_of_finished(rec));
  }
  model_.host.runs_by_result = journal_->runs_by_state();
  model_.host.runs_by_result.erase("running");
}

void RunHistory::journal_result(bool ok, const std::string& run_id) {
  if (ok) {
    if (journal_failing_) {
      journal_failing_ = false;
      spdlog::info("journal {} writes work again", journal_->path());
      // Runs that finished meanwhile are journaled now.
      for (auto it = unjournaled_.begin(); it != unjournaled_.end();) {
        const auto& r = it->second;
        if (!journal_->run_finished(it->first, r.value("state", ""), r.value("result", 3), r, dump_json(r))) break;
        it = unjournaled_.erase(it);
      }
    }
    model_.metrics.journal_failing = journal_failing_;
    return;
  }
  if (!journal_failing_) {
    journal_failing_ = true;
    spdlog::error("journal {} cannot be written: {}; the runs it was recording end with an infrastructure error "
                  "(further failures are not logged until writes work again)",
                  journal_->path(), journal_->write_error());
  }
  model_.metrics.journal_failing = true;
  if (!run_id.empty() && on_write_failed_) on_write_failed_(run_id, journal_->write_error());
}

void RunHistory::run_created(const std::string& id, const std::string& created, const nlohmann::json& request,
                             const nlohmann::json& skeleton) {
  durable();
  const std::string text = dump_json(skeleton);  // once for both: a run of thousands of steps is megabytes
  bool ok = journal_->run_created(id, created, request, text);
  // Beside its logs from the start: a run interrupted before its first job ends is still in a rebuilt history.
  write_record(id, skeleton, text);
  journal_result(ok, id);
}

void RunHistory::step_changed(const std::string& run, int job, int step, const nlohmann::json& data, const nlohmann::json* head,
                              const nlohmann::json* step_state) {
  const bool with_state = step_state && engine_state_;
  const std::function<bool()> write = [&] {
    // With the engine's state kept, the step's view goes into its row (one row a transition, not an event and a
    // row: recover() reads it back); otherwise an event.
    if (with_state) return save_engine_state(run, head, job, step, *step_state, &data);
    return journal_->event(run, "step", job, step, data);
  };
  // In this turn's group (run_history_commits.cpp), or in a transaction of its own when there is none.
  if (grouped(run, write)) return;
  const bool ok = journal_->together(write);
  // Not committed: what the engine state remembers having written is not known to be there.
  if (!ok && with_state) engine_state_->forget_written(run);
  journal_result(ok, run);
}

void RunHistory::engine_state_changed(const std::string& run, const nlohmann::json& head, int job, int step,
                                      const nlohmann::json& step_state) {
  if (!engine_state_) return;
  if (grouped(run, [&] {
        save_engine_state(run, &head, job, step, step_state);
        return true;
      }))
    return;
  save_engine_state(run, &head, job, step, step_state);
}

bool RunHistory::save_engine_state(const std::string& run, const nlohmann::json* head, int job, int step, const nlohmann::json& step_state,
                                   const nlohmann::json* view) {
  const bool ok = step_state.is_null() ? (!head || engine_state_->save_head(run, *head)) : engine_state_->save(run, head, job, step, step_state, view);
  // A failing write costs the run nothing now, only its take-over by a next daemon (it would end interrupted).
  if (!ok && !engine_state_failing_) spdlog::error("run {}: its engine state cannot be kept ({}): a restart now would interrupt it", run, engine_state_->error());
  engine_state_failing_ = !ok;
  return ok;
}

std::optional<nlohmann::json> RunHistory::engine_state(const std::string& run) {
  return engine_state_ ? engine_state_->load(run) : std::nullopt;
}

void RunHistory::job_finished(const std::string& run, int job, const nlohmann::json& data, const nlohmann::json* record) {
  durable();
  journal_result(journal_->event(run, "job", job, -1, data), run);
  // Each job's end is kept beside the run's logs too, so the history survives a lost journal.
  if (record) write_record(run, *record);
}

void RunHistory::record_duration(const std::string& step_key, double seconds, const std::string& finished) {
  durations_.push_back({step_key, seconds, finished});
  if (durations_.size() >= kDurationBatch) write_durations();
}

void RunHistory::write_durations() {
  if (durations_.empty()) return;
  durable();  // this turn's group first: one transaction of the connection at a time
  const bool ok = journal_->record_durations(durations_);
  durations_.clear();  // estimates: a journal refusing them loses them
  journal_result(ok, "");
}

void RunHistory::card_event(CardEvent e) {
  card_rows_.push_back({e.card, e.end, dump_json(e.json())});
  model_.cards.add(std::move(e));
  if (!card_flush_) return flush();
  if (card_rows_.size() > 1) return;  // a write is due already
  card_flush_->expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(kCardEventBatchSeconds)));
  card_flush_->async_wait([this](boost::system::error_code ec) {
    if (!ec) flush();
  });
}

void RunHistory::batch_card_events(boost::asio::io_context& io) { card_flush_ = std::make_unique<boost::asio::steady_timer>(io); }

void RunHistory::flush() {
  durable();
  write_durations();
  if (card_rows_.empty()) return;
  const bool ok = journal_->add_card_events(card_rows_);
  card_rows_.clear();  // the read model has them; a journal refusing them loses them with the next restart only
  journal_result(ok, "");
}

RunHistory::~RunHistory() {
  flush();
  stop_grouping();
  if (tests_writer_) tests_writer_->join();
}

void RunHistory::record_tests(StepTests step) {
  if (!tests_writer_) return;
  const double window = model_.tests_window_days * TestHistory::kDay;
  boost::asio::post(*tests_writer_, [this, window, step = std::move(step)] {
    // Another connection of the journal's file (the journal, the engine state) may hold its write lock past the
    // busy timeout on a loaded disk: tried again before the step's results are given up (its run keeps them).
    bool ok = tests_->record(step);
    for (int again = 0; !ok && again < 3; ++again) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      ok = tests_->record(step);
    }
    if (ok && tests_failing_) spdlog::info("test history writes work again");
    if (!ok && !tests_failing_) spdlog::error("test history cannot be written: {} (not logged again until writes work)", tests_->error());
    tests_failing_ = !ok;
    if (ok) tests_flaky_ = tests_->flaky_since(epoch_now() - window);
    if (on_tests_written_) on_tests_written_();
  });
}

void RunHistory::run_finished(const std::string& id, const std::string& state, int result, const nlohmann::json& record) {
  durable();
  const std::string text = dump_json(record);  // once for both
  write_record(id, record, text);
  if (engine_state_) engine_state_->drop(id);  // nothing of it is left to take over
  if (!journal_->run_finished(id, state, result, record, text)) {
    journal_result(false, "");
    unjournaled_[id] = record;  // journaled when writes work again
  }
  write_durations();  // what its steps took, for the estimates of the runs after it
  model_.metrics.runs_by_result[state]++;
  remember_finished(record);
}

void RunHistory::remember_finished(const nlohmann::json& record) {
  RunOverview o = overview_of_finished(record);
  model_.host.runs_by_result[o.state]++;
  model_.host.recent.push_front(std::move(o));
  while (model_.host.recent.size() > kRecentRuns) model_.host.recent.pop_back();
}

void RunHistory::write_record(const std::string& id, const nlohmann::json& record) { write_record(id, record, dump_json(record)); }

void RunHistory::write_record(const std::string& id, const nlohmann::json& record, const std::string& text) {
  // Written whole beside, flushed to the disk, then renamed over the old one: a crash or power loss leaves
  // the old record or the new one, never half of one.
  const std::string dir = run_dir(state_dir_, id);
  const std::string path = run_record(dir), tmp = path + ".tmp";
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::string error;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);  // the daemon's alone (run_tree.h)
  if (fd < 0) {
    error = std::strerror(errno);
  } else {
    std::size_t done = 0;
    while (done < text.size()) {
      ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    if (done != text.size() || ::fsync(fd) != 0) error = std::strerror(errno);
    if (::close(fd) != 0 && error.empty()) error = std::strerror(errno);
    if (error.empty()) fs::rename(tmp, path, ec);
    if (error.empty() && ec) error = ec.message();
  }
  const bool finished = record.value("state", "") != "running";
  if (!error.empty()) {
    fs::remove(tmp, ec);
    if (!record_failing_) spdlog::error("cannot write {} ({}); the journal keeps the run's history", path, error);
    record_failing_ = true;
    if (finished) model_.held_records[id] = record;  // served from memory until a write works
    model_.finished_texts.forget(id);
    return;
  }
  record_failing_ = false;
  model_.held_records.erase(id);
  if (finished) model_.finished_texts.keep(id, text);
  else model_.finished_texts.forget(id);
}

void RunHistory::remove_run_dir(const std::string& run_dir) {
  boost::asio::post(removals_, [mirror = mirror_, run_dir] {
    std::error_code ec;
    if (mirror && fs::exists(run_worktree(run_dir), ec)) mirror->remove(run_worktree(run_dir));
    fs::remove_all(run_dir, ec);
  });
}

void RunHistory::prune(const RetentionConfig& r, double tests_retention_days, int keep_worktrees, bool at_start,
                       const std::function<bool(const std::string&)>& live) {
  durable();
  // At most hourly: a day's rows go at a time, and finding them scans the sums table.
  if (tests_writer_ && tests_retention_days > 0 && (at_start || epoch_now() - tests_pruned_at_ > 3600)) {
    tests_pruned_at_ = epoch_now();
    boost::asio::post(*tests_writer_, [this, before = epoch_now() - tests_retention_days * TestHistory::kDay] {
      if (!tests_->prune(before)) spdlog::warn("retention: cannot prune the test history now: {}", tests_->error());
    });
  }
  std::string cutoff;
  if (r.max_age_days > 0)
    cutoff = iso_time(wall_now() -
                      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(r.max_age_days * 86400)));
  std::vector<std::string> pruned;
  try {
    pruned = journal_->prune(r.max_runs, cutoff);
  } catch (const std::exception& e) {
    spdlog::warn("retention: cannot prune the journal now: {}", e.what());
  }
  for (const auto& id : pruned) {
    remove_run_dir(run_dir(state_dir_, id));
    model_.held_records.erase(id);
    model_.finished_texts.forget(id);
  }
  if (!pruned.empty() && !at_start) {
    std::set<std::string> gone(pruned.begin(), pruned.end());
    auto& recent = model_.host.recent;
    for (auto it = recent.begin(); it != recent.end();) it = gone.count(it->id) ? recent.erase(it) : std::next(it);
    model_.host.runs_by_result = journal_->runs_by_state();
    model_.host.runs_by_result.erase("running");
  }
  if (!pruned.empty()) spdlog::info("retention: pruned {} finished run(s) (max-runs {}, max-age-days {})", pruned.size(), r.max_runs, r.max_age_days);
  if (mirror_) {
    std::vector<std::string> old = journal_->finished_runs_after(keep_worktrees);
    boost::asio::post(removals_, [mirror = mirror_, state_dir = state_dir_, old] {
      for (const auto& id : old) {
        std::string src = run_worktree(run_dir(state_dir, id));
        std::error_code ec;
        if (fs::exists(src, ec)) mirror->remove(src);
      }
    });
  }
  if (!at_start) return;
  const std::set<std::string> pruned_now(pruned.begin(), pruned.end());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runs_dir(state_dir_), ec)) {
    std::string id = e.path().filename().string();
    // A run just pruned is on its way out (removed on a worker): not an orphan to warn about.
    if (!live(id) && !pruned_now.count(id) && !journal_->has_run(id)) {
      spdlog::warn("removing {}: no run of the journal owns it (a refused or interrupted submission)", e.path().string());
      remove_run_dir(e.path().string());
    }
  }
}

}  // namespace pto
