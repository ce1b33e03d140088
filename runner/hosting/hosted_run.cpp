#include "hosting/hosted_run.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "exec/card_access.h"
#include "lease/lease_book.h"
#include "reuse/result_key.h"
#include "sandbox/run_tree.h"
#include "sandbox/user_lender.h"
#include "server/access.h"
#include "util/random_hex.h"
#include "util/secret_mask.h"
#include "util/state_paths.h"

namespace pto {

HostedRun::HostedRun(const RunHosting& host, Plan plan, EngineOptions eo, nlohmann::json request, RunObserver* observer,
                     RunJournal* journal, const std::string& run_token)
    : host_(host), id_(eo.run_id), run_dir_(eo.run_dir), request_(std::move(request)), observer_(observer) {
  if (host_.leases) {
    // The run's own token for its steps' `task-submit` calls: their leases are charged to it and die with it;
    // each attempt of a step gets one of its own (step_token), whose leases end with the attempt.
    const std::string token = run_token.empty() ? random_hex(16) : run_token;
    host_.leases->access.add_run_token(token, id_);
    eo.base_env["PTO_RUNNER_SERVER"] = host_.leases->url;
    eo.base_env["PTO_RUNNER_LEASE_TOKEN"] = token;
    eo.step_lease_token = [this](std::size_t job, std::size_t step, double seconds_left) { return step_token(job, step, seconds_left); };
  }
  base_env_ = eo.base_env;
  caches_ = eo.caches;
  for (const PlanJob& j : plan.jobs)
    for (const PlanStep& st : j.steps) {
      cache_names_.insert(st.caches.begin(), st.caches.end());
      if (eo.reuse && st.reuse) reuse_globs_.insert(st.reuse_inputs);
    }
  engine_ = std::make_unique<RunEngine>(EngineSeams{host_.io, host_.clock, host_.broker, host_.executor, this, journal},
                                        std::move(plan), std::move(eo));
  engine_->set_on_finished([this] {
    if (on_finished_) on_finished_(*this);
  });
}

HostedRun::~HostedRun() {
  // A run dropped without its return (refused after planning, a host going away): no token of it stays valid.
  if (host_.leases) host_.leases->access.forget_run(id_);
}

bool HostedRun::begin() {
  if (begun_) return true;
  if (!host_.users.active()) {
    begun_ = true;
    if (std::string e = prepare_run_tree(run_dir_, nullptr); !e.empty()) spdlog::warn("run {}: {}", id_, e);
    if (caches_ && !cache_names_.empty())
      if (std::string e = caches_->prepare(cache_names_, nullptr); !e.empty()) spdlog::warn("run {}: its caches: {}", id_, e);
    engine_->set_input_trees(read_input_trees());
    engine_->start();
    return true;
  }
  std::optional<RunAs> user = host_.users.lend(id_);
  if (!user) return false;
  begun_ = true;
  user_ = *user;
  // A protected run's user writes the protected tier of the caches as a member of their group (caches/cache_tiers).
  if (caches_ && !cache_names_.empty() && caches_->group()) user_->groups.push_back(*caches_->group());
  engine_->run_as(*user_);
  // The worktree may hold thousands of files to hand to the user, and so may its caches' tier: off the engine thread.
  auto trees = std::make_shared<std::map<std::string, std::string>>();
  off_thread(
      [this, dir = run_dir_, u = *user_, caches = caches_, names = cache_names_, trees] {
        *trees = read_input_trees();  // before its worktree is its user's
        std::string e = prepare_run_tree(dir, &u);
        if (e.empty() && caches && !names.empty())
          if (std::string c = caches->prepare(names, &u); !c.empty()) e = "its caches: " + c;
        return e;
      },
      [this, trees](const std::string& problem) {
        engine_->set_input_trees(std::move(*trees));
        if (on_handover_changed_) on_handover_changed_(*this);  // the trees are part of what a next daemon gets
        engine_->start();
        if (!problem.empty()) engine_->abort("the run's directory could not be given to its sandbox user: " + problem);
      });
  return true;
}

std::map<std::string, std::string> HostedRun::read_input_trees() const {
  std::map<std::string, std::string> trees;
  const std::string src = run_worktree(run_dir_);
  for (const auto& globs : reuse_globs_) {
    std::vector<std::string> with_pin = globs;
    if (!with_pin.empty()) with_pin.push_back("toolchain/versions.env");  // the pin is an input of every step
    std::string error;
    trees[globs_text(globs)] = inputs_tree(src, with_pin, error);
    if (!error.empty()) spdlog::warn("run {}: its steps are not reused: {}", id_, error);
  }
  return trees;
}

nlohmann::json HostedRun::handover() const {
  nlohmann::json file_env = nlohmann::json::array();
  for (const JobRecord& j : engine_->record().jobs) file_env.push_back(j.file_env);
  // The inputs' trees were read before the worktree was its user's: the next daemon keeps them rather than read
  // a worktree its steps may have changed since.
  return {{"base_env", base_env_}, {"mask", engine_->mask().values()}, {"user", user_ ? user_->name : ""}, {"file_env", file_env},
          {"input_trees", engine_->input_trees()}};
}

std::size_t HostedRun::handover_size() const {
  std::size_t n = engine_->mask().values().size();
  for (const JobRecord& j : engine_->record().jobs)
    for (const auto& [k, v] : j.file_env) n += 1 + k.size() + v.size();
  return n;
}

std::string HostedRun::adopt(RunRecord saved, const std::string& user, const Reattach& reattach) {
  begun_ = true;
  // A run that ran as a sandbox user never goes on as this daemon's own user.
  if (!user.empty() && !host_.users.active()) return "it ran as sandbox user " + user + " and this daemon has no sandbox (" + host_.users.why() + ")";
  if (!user.empty()) {
    std::optional<RunAs> u = host_.users.lend_again(id_, user);
    if (!u) return "its sandbox user " + user + " cannot be lent to it again";
    user_ = *u;
    if (caches_ && !cache_names_.empty() && caches_->group()) user_->groups.push_back(*caches_->group());
    engine_->run_as(*user_);
  }
  return engine_->adopt(std::move(saved), [this, reattach](std::size_t j, std::size_t s, const std::string& marker, const std::vector<int>& cards,
                                                          std::function<void(const StepOutcome&)> done) -> std::uint64_t {
    const StepId step{j, s};
    const bool ended = !done;
    Reattached r = reattach(step, marker, cards, std::move(done));
    if (ended || !r.handle) return 0;
    // Its leases are accepted again; its cards' files are its user's again (the new daemon's sandbox took every
    // grant back at its start).
    if (host_.leases && !r.lease_token.empty()) {
      host_.leases->access.add_step_token(r.lease_token, id_, step);
      step_tokens_[step] = {r.lease_token, 0};
    }
    if (user_ && host_.cfg.executor != ExecutorKind::Slurm) {  // Slurm's cards are on its nodes
      std::vector<std::string> files;
      for (int card : cards)
        for (const std::string& f : host_.cfg.files_of_card(card)) files.push_back(f);
      if (std::string e = grant_file_access(files, user_->uid); !e.empty()) spdlog::warn("run {}: {}", id_, e);
    }
    return r.handle;
  });
}

void HostedRun::cancel(int signal, const std::string& reason) {
  engine_->cancel(signal, reason);
  end_leases(reason.empty() ? "its run was cancelled" : reason);
  if (!begun_) {  // everything is cancelled already: it ends at once
    begun_ = true;
    engine_->start();
  }
}

void HostedRun::supersede(const std::string& newer_run) {
  engine_->supersede(newer_run);
  end_leases("its run was superseded by run " + newer_run);
  if (!begun_) {
    begun_ = true;
    engine_->start();
  }
}

void HostedRun::abort(const std::string& problem) {
  if (engine_->finished()) return;
  engine_->abort(problem);
  end_leases("its run was stopped: " + problem);
}

std::optional<Answer> HostedRun::admit_lease(LeaseRequest& request, const Caller& by) const {
  // A run's leases: at most max-cards-per-run cards at once, and none past its step.
  const int asked = request.device_ids.empty() ? request.devices : static_cast<int>(request.device_ids.size());
  const int held = host_.leases ? host_.leases->book.cards_of_run(id_) : 0;
  if (host_.cfg.max_cards_per_run > 0 && held + asked > host_.cfg.max_cards_per_run)
    return Answer::error(Outcome::Conflict, "max-cards-per-run is " + std::to_string(host_.cfg.max_cards_per_run) + ": run " + id_ +
                                                " holds or waits for " + std::to_string(held) + " card(s) by lease and asks for " +
                                                std::to_string(asked) + " more");
  if (!by.step) return std::nullopt;
  request.step = by.step;
  // A step retried elsewhere: its harness's leases keep off the cards its failure was charged to.
  request.avoid = engine_->avoided_by(by.step->job, by.step->step);
  auto t = step_tokens_.find(*by.step);
  if (t != step_tokens_.end() && t->second.deadline > 0) {
    const double left = std::max(1.0, t->second.deadline - host_.clock.now());
    if (request.max_seconds <= 0 || request.max_seconds > left) request.max_seconds = left;
  }
  return std::nullopt;
}

void HostedRun::lease_card_access(const Lease& l, bool granted) {
  if (!user_) return;
  std::vector<std::string> files;
  for (int card : l.cards)
    for (const std::string& f : host_.cfg.files_of_card(card)) files.push_back(f);
  const std::string problem = granted ? grant_file_access(files, user_->uid) : revoke_file_access(files, user_->uid);
  if (!problem.empty()) spdlog::warn("lease {}: {}", l.id, problem);
}

const StepRecord::Failure* HostedRun::lease_ended(const Lease& l) {
  if (!l.report.given || !l.request.step) return nullptr;
  // Passed or not: a passing batch's markers are what shows another card's failed cases to be that card's.
  return engine_->lease_ended(l.request.step->job, l.request.step->step, l.id, l.cards, l.report.exit_code, l.report.signal,
                              l.report.output, l.request.test);
}

void HostedRun::give_back(std::function<void()> done) {
  if (given_back_) return done();
  given_back_ = true;
  end_leases("its run ended");
  if (host_.leases) host_.leases->access.forget_run(id_);
  step_tokens_.clear();
  if (!user_) return done();
  // What still runs as its user is killed and what it left removed (sandbox/user_leftovers), then what it owned
  // in its tree goes back to root (its $GITHUB_* files may hold secret values, its home what it left there):
  // the next run lent this user must find nothing of this one. All of it on a worker (it reads all of /proc
  // and every world-writable directory); the user is lent to nobody else until it is done.
  off_thread(
      [id = id_, dir = run_dir_, caches = caches_, names = cache_names_, uid = user_->uid, sweep = host_.users.leftovers_sweep(id_)] {
        if (sweep)
          if (const std::string swept = sweep(); !swept.empty()) spdlog::warn("run {} ended: {}", id, swept);
        std::string e = reclaim_run_tree(dir);
        // What a protected run's user wrote in the protected tiers goes to root before the user is lent again.
        if (caches && !names.empty())
          if (std::string c = caches->reclaim(names, uid); !c.empty() && e.empty()) e = "its caches: " + c;
        return e;
      },
             [this, done = std::move(done)](const std::string& problem) {
               if (!problem.empty()) spdlog::error("run {}: {}", id_, problem);
               if (std::string swept = host_.users.give_back(id_); !swept.empty()) spdlog::warn("run {} ended: {}", id_, swept);
               user_.reset();
               done();
             });
}

std::string HostedRun::step_token(std::size_t job, std::size_t step, double seconds_left) {
  const std::string token = random_hex(16);
  const StepId s{job, step};
  host_.leases->access.add_step_token(token, id_, s);
  step_tokens_[s] = {token, seconds_left > 0 ? host_.clock.now() + seconds_left : 0};
  return token;
}

void HostedRun::step_stopped(const StepId& step) {
  auto t = step_tokens_.find(step);
  if (t == step_tokens_.end()) return;
  host_.leases->access.forget_token(t->second.token);
  step_tokens_.erase(t);
  host_.leases->book.end_step(id_, step, "the step that asked for it ended");
}

void HostedRun::end_leases(const std::string& why) {
  if (host_.leases) host_.leases->book.end_run(id_, why);  // the harness's leased commands stop with the run's steps
}

void HostedRun::off_thread(std::function<std::string()> work, std::function<void(const std::string&)> then) {
  if (!host_.blocking) return then(work());
  boost::asio::post(*host_.blocking, [this, work = std::move(work), then = std::move(then)]() mutable {
    std::string answer = work();
    boost::asio::post(host_.io, [then = std::move(then), answer = std::move(answer)] { then(answer); });
  });
}

void HostedRun::on_step_changed(const RunRecord& r, const Plan& p, int job, int step, StepState from) {
  // A step's end may have added masks or $GITHUB_ENV values: its supervisor's copy of the handover follows.
  if (on_handover_changed_ && from == StepState::Running)
    if (const std::size_t size = handover_size(); size != handover_size_) {
      handover_size_ = size;
      on_handover_changed_(*this);
    }
  if (from == StepState::Running && r.jobs[job].steps[step].state != StepState::Running)
    step_stopped(StepId{static_cast<std::size_t>(job), static_cast<std::size_t>(step)});
  if (observer_) observer_->on_step_changed(r, p, job, step, from);
}

void HostedRun::on_step_output(const RunRecord& r, const Plan& p, int job, int step, std::string_view line) {
  if (observer_) observer_->on_step_output(r, p, job, step, line);
}

void HostedRun::on_job_finished(const RunRecord& r, const Plan& p, int job) {
  if (observer_) observer_->on_job_finished(r, p, job);
}

void HostedRun::on_run_finished(const RunRecord& r, const Plan& p) {
  if (observer_) observer_->on_run_finished(r, p);
}

void HostedRun::on_attempt_failed(const RunRecord& r, const Plan& p, int job, int step, const StepRecord::Failure& f, bool retried) {
  if (observer_) observer_->on_attempt_failed(r, p, job, step, f, retried);
}

void HostedRun::on_health_check(const RunRecord& r, int card, const std::string& command, double seconds, const std::string& failure) {
  if (observer_) observer_->on_health_check(r, card, command, seconds, failure);
}

}  // namespace pto
