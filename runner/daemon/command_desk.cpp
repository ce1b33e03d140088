#include "daemon/command_desk.h"

#include "bisect/host_questions.h"
#include "daemon/model_refresh.h"
#include "host/host.h"
#include "hosting/run_host.h"
#include "hosting/shutdown.h"
#include "store/run_history.h"
#include "store/run_store.h"

namespace pto {

namespace {
// Who made a mute, as it is kept and logged: a token says no name, so the admin is named by where it called from.
std::string who(const Caller& by) { return by.user.empty() ? "admin (" + by.peer + ")" : by.user; }
}  // namespace

void CommandDesk::submit_run(RunSubmission submission, const Caller& by, Reply reply) {
  o_.runs.submit(std::move(submission), by.peer, std::move(reply));  // refused there while stopping
}

Answer CommandDesk::cancel_run(const std::string& id, const Caller& by) { return o_.runs.cancel(id, by.peer); }

Answer CommandDesk::detach_client(const std::string& run, const std::string& client, bool cancel, const Caller&) {
  Answer a = o_.runs.detach(run, client, cancel);
  if (a.outcome == Outcome::Ok) o_.view.now();
  return a;
}

Answer CommandDesk::change_card(int card, bool drain, const std::string& reason, const Caller& by) {
  Answer a = o_.host.change_card(card, drain, reason, by.peer);
  if (a.outcome == Outcome::Ok) o_.view.now();
  return a;
}

Answer CommandDesk::change_node(const std::string& node, bool drain, const std::string& reason, const Caller& by) {
  return o_.host.change_node(node, drain, reason, by.peer);
}

Answer CommandDesk::mute_test(const TestMute& m, const Caller& by) { return o_.store.mute(m, who(by)); }

Answer CommandDesk::unmute_test(const std::string& glob, const Caller& by) { return o_.store.unmute(glob, who(by)); }

void CommandDesk::start_bisection(BisectSpec spec, const Caller& by, Reply reply) {
  if (o_.stop.stopping()) return reply(o_.stop.refusal());
  o_.questions.start_bisection(std::move(spec), by.peer, std::move(reply));
}

Answer CommandDesk::cancel_bisection(const std::string& id, const Caller& by) { return o_.questions.cancel_bisection(id, by.peer); }

void CommandDesk::request_lease(LeaseRequest request, const Caller& by, Reply reply) {
  o_.runs.leases().request(std::move(request), by, std::move(reply));
}

Answer CommandDesk::heartbeat_lease(const std::string& id, const Caller& by) { return o_.runs.leases().heartbeat(id, by); }

void CommandDesk::end_lease(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, Reply reply) {
  o_.runs.leases().end(id, why, report, by, std::move(reply));
}

void CommandDesk::run_read(const std::string& id) { o_.stop.run_read(id); }

void CommandDesk::when_run_ends(const std::string& id, std::weak_ptr<const std::function<void()>> ended) {
  o_.runs.when_ended(id, std::move(ended));
}

void CommandDesk::durable() {
  if (o_.store.opened()) o_.store.history().durable();
}

}  // namespace pto
