// The Markdown summary `run` and `submit` write to GitHub's $GITHUB_STEP_SUMMARY, from a run's JSON.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "report/run_view.h"

using nlohmann::json;

namespace {
json step(const std::string& name, const std::string& summary) {
  return {{"name", name}, {"state", "succeeded"}, {"started", "2026-11-30T00:00:00Z"}, {"duration_seconds", 1.0},
          {"cards", json::array()}, {"exit_code", 0}, {"signal", nullptr}, {"timed_out", false}, {"error", nullptr},
          {"summary", summary.empty() ? json(nullptr) : json(summary)}};
}
}  // namespace

TEST_CASE("step summary: the run's table, then each step's own summary, all within GitHub's 1 MiB", "[report]") {
  const std::string big(700 * 1024, 'x');
  json run = {{"id", "r1"},
              {"jobs", json::array({{{"id", "j"}, {"steps", json::array({step("a", "## from a\n"), step("b", big), step("c", big),
                                                                         step("d", "")})}}})}};
  std::string md = pto::markdown_summary(run);
  CHECK(md.rfind("### pto-runner run r1\n\n| Job | Step |", 0) == 0);
  CHECK(md.find("| j | d | succeeded |") != std::string::npos);
  CHECK(md.find("\n## from a\n") != std::string::npos);
  // b fits, c would take the whole past 1 MiB: left out and named, so GitHub keeps the rest.
  CHECK(md.find(big) != std::string::npos);
  CHECK(md.size() <= 1024 * 1024);
  CHECK(md.find("the summaries of j / c (in the run's JSON)") != std::string::npos);
}
