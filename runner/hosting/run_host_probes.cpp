// The runs the daemon makes itself to answer questions on its cards: a bisection's probes (bisect/bisections)
// and control runs (bisect/control_runs). Each is made as any submission is (RunHost::submit), named for what
// asked; this file adapts that to bisect/'s ProbeHost.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "hosting/run_host.h"
#include "hosting/shutdown.h"
#include "util/worker_pools.h"

namespace pto {

ProbeHost RunHost::probes() {
  ProbeHost h;
  h.submit = [this](ProbeRun p, std::function<void(ProbeAnswer)> answered) {
    RunSubmission s;
    s.jobs = {p.job};
    s.sha = p.sha;
    s.ref = p.ref;
    s.probe = RunSubmission::Probe{p.job, p.step, p.tests, p.priority, p.purpose, p.perf_base, p.cards, p.perf_against};
    submit(std::move(s), p.purpose, [answered = std::move(answered)](Answer a) {
      ProbeAnswer out;
      if (a.outcome == Outcome::Created) out.run = a.body.value("id", "");
      else out.why = a.body.value("error", "the run could not be made"), out.commit_fault = a.outcome == Outcome::BadRequest;
      answered(std::move(out));
    });
  };
  h.cancel = [this](const std::string& run, const std::string& why) { cancel(run, why); };
  h.git = [this](std::function<void()> work, std::function<void()> then) {
    boost::asio::post(parts_.pools.git, [this, work = std::move(work), then = std::move(then)]() mutable {
      work();
      boost::asio::post(parts_.io, std::move(then));
    });
  };
  h.stopping = [this] { return parts_.stop.stopping(); };
  return h;
}

}  // namespace pto
