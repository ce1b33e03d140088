// Secrets (SPEC: Secrets): submit --secret reaches the steps' environment only, and its value (plain, base64,
// URL-encoded, each line of a multi-line one) and what a step adds with ::add-mask:: are *** in the log file as
// written, the log API, submit's output, the summary and the outputs.
#include <catch2/catch.hpp>

#include "served_daemon.h"
#include "util/api_paths.h"

using namespace pto::test;

TEST_CASE("secrets: a secret echoed by a step, plain, base64 and URL-encoded, and a value it masks itself are *** in "
          "the log file, the log API, submit's output and the summary", "[secrets]") {
  Served s;
  const std::string secret = "s3cr3t/Value+with space";
  write_project(s.dir, {{"leak.yml", "name: leak\nsteps:\n  - id: one\n    run: |\n"
                                     "      echo \"plain: $MY_SECRET\"\n"
                                     "      echo \"b64: $(printf %s \"$MY_SECRET\" | base64 -w0)\"\n"
                                     "      echo \"url: $(python3 -c 'import os, urllib.parse; print(urllib.parse.quote(os.environ[\"MY_SECRET\"], safe=\"\"))')\"\n"
                                     "      printf 'first line\\nkey-line-two\\n' > /dev/null\n"
                                     "      echo '::add-mask::later-secret'\n"
                                     "      echo \"added: later-secret\"\n"
                                     "      echo \"v=$MY_SECRET\" >> \"$GITHUB_OUTPUT\"\n"
                                     "      echo \"summary has $MY_SECRET\" >> \"$GITHUB_STEP_SUMMARY\"\n"}});
  s.start();
  const fs::path summary = s.dir.path() / "summary.md";
  CommandResult r = run_cli({"submit", "--server", s.url(), "--token-file", s.state() + "/token", "--wait", "--follow", "--secret", "MY_SECRET"},
                            {{"MY_SECRET", secret}, {"GITHUB_STEP_SUMMARY", summary.string()}, {"GITHUB_ACTIONS", "true"}});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string id = r.out.substr(r.out.find("submitted run ") + 14, 20);
  json run = s.get(api_path::run(id));
  const std::string log_file = read_file(run["jobs"][0]["steps"][0]["log_path"].get<std::string>());
  auto api = pto::api_request("GET", s.url(api_path::step_log(id, "1-1")));
  const std::string b64 = "czNjcjN0L1ZhbHVlK3dpdGggc3BhY2U=", url = "s3cr3t%2FValue%2Bwith%20space";
  for (const std::string* text : std::vector<const std::string*>{&log_file, &api.body, &r.out}) {
    CHECK(text->find("plain: ***") != std::string::npos);
    CHECK(text->find("b64: ***") != std::string::npos);
    CHECK(text->find("url: ***") != std::string::npos);
    CHECK(text->find("added: ***") != std::string::npos);
    for (const std::string& form : {secret, b64, url, std::string("later-secret")}) CHECK(text->find(form) == std::string::npos);
  }
  // Its output and summary are stored masked; the request keeps the secret's name only.
  CHECK(run["jobs"][0]["steps"][0]["outputs"]["v"] == "***");
  CHECK(run.dump().find(secret) == std::string::npos);
  CHECK(run["request"]["secrets"] == json::array({"MY_SECRET"}));
  INFO(read_file(summary));
  CHECK(read_file(summary).find(secret) == std::string::npos);
  CHECK(read_file(summary).find("summary has ***") != std::string::npos);
  // Nothing the daemon keeps holds it.
  std::string grep_out;
  CHECK(sh("grep -rlF -- '" + secret + "' " + s.state() + " || true", &grep_out) == 0);
  INFO(grep_out);
  CHECK(grep_out.empty());
}
