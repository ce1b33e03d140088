#include "server/host_commands.h"

namespace pto {

namespace {
Answer not_here() { return Answer::error(Outcome::NotFound, "not served here"); }
}  // namespace

void HostCommands::submit_run(RunSubmission, const Caller&, Reply reply) { reply(not_here()); }
Answer HostCommands::cancel_run(const std::string&, const Caller&) { return not_here(); }
Answer HostCommands::detach_client(const std::string&, const std::string&, bool, const Caller&) { return not_here(); }
Answer HostCommands::change_card(int, bool, const std::string&, const Caller&) { return not_here(); }
Answer HostCommands::change_node(const std::string&, bool, const std::string&, const Caller&) { return not_here(); }
Answer HostCommands::mute_test(const TestMute&, const Caller&) { return not_here(); }
Answer HostCommands::unmute_test(const std::string&, const Caller&) { return not_here(); }
void HostCommands::start_bisection(BisectSpec, const Caller&, Reply reply) { reply(not_here()); }
Answer HostCommands::cancel_bisection(const std::string&, const Caller&) { return not_here(); }

}  // namespace pto
