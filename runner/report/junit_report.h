#pragma once
// A run's test cases as one JUnit XML report (GET /api/v1/runs/{id}/junit.xml), from the run's JSON so a
// running and a finished run render alike. Reruns are Maven Surefire's elements, which Jenkins, GitLab and
// GitHub's test-reporter actions read: a test that failed and then passed has a <flakyFailure> per failed
// attempt; one that failed every time has its last failure and a <rerunFailure> per earlier one.
#include <string>

#include <nlohmann/json.hpp>

namespace pto {

/// One <testsuite> per step with tests (named "JOB / STEP"), one <testcase> per test at its last attempt.
std::string junit_report(const nlohmann::json& run);

/// The run's test cases for GET /api/v1/runs/{id}/tests: {"run", "tests": [{step, ...case}]}, every attempt,
/// or (`failed_only`) each failed test at its last attempt.
nlohmann::json run_tests_json(const nlohmann::json& run, bool failed_only);

}  // namespace pto
