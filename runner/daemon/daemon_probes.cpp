// The runs the daemon makes itself to answer questions on its cards: a bisection's probes (bisect/bisections)
// and control runs (bisect/control_runs). Each is made as any submission (submit_run) by the daemon as the admin,
// named for what asked; this file adapts that to bisect/'s ProbeHost.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "daemon/daemon.h"

namespace pto {

Caller Daemon::own_caller(const std::string& what) {
  Caller c;
  c.role = Caller::Role::Admin;
  c.peer = what;
  return c;
}

ProbeHost Daemon::probe_host() {
  ProbeHost h;
  h.submit = [this](ProbeRun p, std::function<void(ProbeAnswer)> answered) {
    RunSubmission s;
    s.jobs = {p.job};
    s.sha = p.sha;
    s.ref = p.ref;
    s.probe = RunSubmission::Probe{p.job, p.step, p.tests, p.priority, p.purpose};
    submit_run(std::move(s), own_caller(p.purpose), [answered = std::move(answered)](Answer a) {
      ProbeAnswer out;
      if (a.outcome == Outcome::Created) out.run = a.body.value("id", "");
      else out.why = a.body.value("error", "the run could not be made"), out.commit_fault = a.outcome == Outcome::BadRequest;
      answered(std::move(out));
    });
  };
  h.cancel = [this](const std::string& run, const std::string& why) { cancel_run(run, own_caller(why)); };
  h.git = [this](std::function<void()> work, std::function<void()> then) {
    boost::asio::post(pools_->git, [this, work = std::move(work), then = std::move(then)]() mutable {
      work();
      boost::asio::post(io_, std::move(then));
    });
  };
  h.stopping = [this] { return stop_.stopping(); };
  return h;
}

void Daemon::start_bisection(BisectSpec spec, const Caller& by, Reply reply) {
  if (!endpoints_ || stop_.stopping()) return reply(stop_.refusal());
  bisections_->start(std::move(spec), by.peer, std::move(reply));
}

Answer Daemon::cancel_bisection(const std::string& id, const Caller& by) { return bisections_->cancel(id, by.peer); }

}  // namespace pto
