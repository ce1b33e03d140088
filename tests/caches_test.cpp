// Named caches scoped by trust (caches/): runner.yml's and the jobs' `caches:`, the tiers a ref writes, what a
// step's ccache did, and a real CMake project of 50 sources built through real ccache by a daemon whose steps run
// as sandbox users: main warms the protected tier, a pull request reads it and writes only its own, and what a
// pull request's step plants is never read by main.
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "caches/cache_prune.h"
#include "caches/cache_tiers.h"
#include "caches/ccache_stats.h"
#include "config/project.h"
#include "sandbox_users.h"
#include "served_daemon.h"
#include "test_support.h"
#include "util/random_hex.h"

using namespace pto;
using namespace pto::test;

TEST_CASE("caches: runner.yml's caches are read, and a wrong key or value is named at its line", "[caches]") {
  TempDir d;
  write_project(d, {{"b.yml", "name: b\nsteps:\n  - run: 'true'\n"}});
  d.write("runner.yml",
          "caches:\n  dir: /srv/caches\n  protected-refs: [refs/heads/main, refs/heads/release/*]\n  max-size: 2G\n"
          "  pr-max-age-days: 3\n  group: ccgroup\n");
  Diagnostics diags;
  LoadOptions lo;
  lo.root = d.str();
  Project p = load_project(lo, diags);
  INFO(diags.items().size());
  REQUIRE_FALSE(diags.has_errors());
  CHECK(p.runner.caches.dir == "/srv/caches");
  CHECK(p.runner.caches.max_size == 2ull << 30);
  CHECK(p.runner.caches.pr_max_age_days == 3);
  CHECK(p.runner.caches.group == "ccgroup");
  CHECK(p.runner.protected_ref("refs/heads/main"));
  CHECK(p.runner.protected_ref("refs/heads/release/1.2"));
  CHECK_FALSE(p.runner.protected_ref("refs/heads/mainline"));
  CHECK_FALSE(p.runner.protected_ref("refs/pull/7/head"));
  CHECK_FALSE(p.runner.protected_ref(""));

  d.write("runner.yml", "caches:\n  remote: {url: 'http://u:p@cache.example/ccache/'}\n  protected-refs: [main]\n  sizes: 1\n");
  CommandResult r = run_cli({"--root", d.str(), "lint"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("runner.yml:2:") != std::string::npos);  // the url carries a credential; no credential-file
  CHECK(r.out.find("carries no credential") != std::string::npos);
  CHECK(r.out.find("'protected-refs' are full refs") != std::string::npos);
  CHECK(r.out.find("sizes") != std::string::npos);
}

TEST_CASE("caches: a job's caches reach its steps' plan, and a cache variable a step also sets by hand is refused at its "
          "line", "[caches]") {
  TempDir d;
  write_project(d, {{"b.yml", "name: b\ncaches: {ccache: CCACHE_DIR}\nsteps:\n  - run: 'true 1'\n"
                               "  - run: 'true 2'\n    caches: {pip: PIP_CACHE_DIR}\n"},
                    {"bad.yml", "name: bad\ncaches: {ccache: CCACHE_DIR, Bad: X, uv: lower}\nsteps:\n  - run: 'true'\n"
                                 "    env:\n      CCACHE_DIR: /tmp/mine\n"}});
  CommandResult r = run_cli({"--root", d.str(), "lint"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("jobs/bad.yml:6:19: error: env.CCACHE_DIR is cache 'ccache''s variable") != std::string::npos);
  CHECK(r.out.find("jobs/bad.yml:2:") != std::string::npos);
  CHECK(r.out.find("got 'Bad'") != std::string::npos);
  CHECK(r.out.find("got 'lower'") != std::string::npos);
  CHECK(r.out.find("jobs/b.yml") == std::string::npos);

  fs::remove(d.path() / "jobs/bad.yml");
  Diagnostics diags;
  LoadOptions lo;
  lo.root = d.str();
  Project p = load_project(lo, diags);
  REQUIRE_FALSE(diags.has_errors());
  REQUIRE(p.jobs.size() == 1);
  CHECK(p.jobs[0].caches.size() == 1);
  CHECK(p.jobs[0].steps[1].caches.size() == 1);
}

TEST_CASE("caches: the tier a run writes follows its ref: protected refs the protected one, a pull request and any other "
          "ref their own", "[caches]") {
  CHECK(CacheScope::of("refs/heads/main", true).writes_protected);
  CHECK(CacheScope::of("refs/pull/7/head", false).name == "pr-7");
  CHECK(CacheScope::of("refs/pull/7/merge", false).name == "pr-7");
  CHECK(CacheScope::of("refs/heads/feature/x y", false).name == "ref-feature-x-y");
  CHECK(CacheScope::of("", false).name == "local");
  CachesConfig cfg;
  cfg.dir = "/c";
  cfg.remote_url = "http://cache.example/cc";
  RunCaches main(cfg, CacheScope::of("refs/heads/main", true), "/s/runs/r1", 1234, "u:secret");
  RunCaches pr(cfg, CacheScope::of("refs/pull/7/head", false), "/s/runs/r2", 1234);
  auto env = [](const std::vector<std::pair<std::string, std::string>>& v) { return std::map<std::string, std::string>(v.begin(), v.end()); };
  auto m = env(main.step_env("ccache", "CCACHE_DIR", "/log"));
  CHECK(m["CCACHE_DIR"] == "/s/runs/r1/tmp/ccache-ccache");
  CHECK(m["CCACHE_REMOTE_STORAGE"] == "file:/c/ccache/protected|update-mtime=true http://u:secret@cache.example/cc/ccache/");
  CHECK(m["CCACHE_REMOTE_ONLY"] == "true");
  CHECK(main.group() == std::optional<gid_t>(1234));
  auto p = env(pr.step_env("ccache", "CCACHE_DIR", "/log"));
  CHECK(p["CCACHE_DIR"] == "/c/ccache/scopes/pr-7");
  CHECK(p["CCACHE_REMOTE_STORAGE"] == "file:/c/ccache/protected|read-only http://cache.example/cc/ccache/|read-only");
  CHECK(p["CCACHE_STATSLOG"] == "/log");
  CHECK_FALSE(pr.group());
  CHECK(env(pr.step_env("pip", "PIP_CACHE_DIR", "/log")) == std::map<std::string, std::string>{{"PIP_CACHE_DIR", "/c/pip/scopes/pr-7"}});
  CHECK(env(main.step_env("pip", "PIP_CACHE_DIR", "/log")) == std::map<std::string, std::string>{{"PIP_CACHE_DIR", "/c/pip/protected"}});
}

TEST_CASE("caches: a step's ccache statistics log gives its calls, hits (from the protected tier too) and misses", "[caches]") {
  const CacheCounts c = parse_ccache_stats_log(
      "# /p/a.cpp\ndirect_cache_hit\nlocal_storage_hit\n# /p/b.cpp\ncache_miss\ndirect_cache_miss\nremote_storage_miss\n"
      "# /p/c.cpp\npreprocessed_cache_hit\nremote_storage_hit\nremote_storage_read_hit\n# /p/d.cpp\ncalled_for_link\n"
      "noise line\n");
  CHECK(c.calls == 3);
  CHECK(c.hits == 2);
  CHECK(c.remote_hits == 1);
  CHECK(c.misses == 1);
  CHECK(CacheCounts::from_json(c.json()).misses == 1);
}

namespace {

void age(const fs::path& p, double days) {
  struct timespec t[2];
  t[0].tv_sec = t[1].tv_sec = ::time(nullptr) - static_cast<time_t>(days * 86400);
  t[0].tv_nsec = t[1].tv_nsec = 0;
  REQUIRE(::utimensat(AT_FDCWD, p.c_str(), t, AT_SYMLINK_NOFOLLOW) == 0);
}

}  // namespace

TEST_CASE("caches: a tier unused past pr-max-age-days goes whole, and past max-size the least recently used files go "
          "first, never one touched in the last minutes", "[caches]") {
  TempDir d;
  CachesConfig cfg;
  cfg.dir = (d.path() / "caches").string();
  cfg.max_size = 10000;
  cfg.pr_max_age_days = 7;
  const std::string kb(1000, 'x');
  for (int i = 0; i < 8; ++i) age(d.write("caches/cc/protected/o" + std::to_string(i), kb), 1 + (8 - i));  // o0 oldest
  age(d.write("caches/cc/scopes/pr-1/a", kb), 8);
  age(d.path() / "caches/cc/scopes/pr-1", 8);
  d.write("caches/cc/scopes/pr-2/fresh1", kb);
  d.write("caches/cc/scopes/pr-2/fresh2", kb);
  d.write("caches/cc/scopes/pr-2/fresh3", kb);
  age(d.write("caches/pip/protected/p", kb), 100);  // old, but its cache is within its bound
  std::vector<std::string> removed;
  auto usage = prune_caches(cfg, static_cast<double>(::time(nullptr)), removed);
  INFO(Catch::Detail::stringify(removed));
  CHECK_FALSE(fs::exists(d.path() / "caches/cc/scopes/pr-1"));
  CHECK(fs::exists(d.path() / "caches/cc/scopes/pr-2/fresh1"));
  // 11 KB over 10 KB: down to 9 KB, oldest first, the three fresh files kept.
  CHECK_FALSE(fs::exists(d.path() / "caches/cc/protected/o0"));
  CHECK_FALSE(fs::exists(d.path() / "caches/cc/protected/o1"));
  CHECK(fs::exists(d.path() / "caches/cc/protected/o2"));
  CHECK(usage["cc"].bytes == 9000);
  CHECK(usage["cc"].scopes == 1);
  CHECK(usage["pip"].bytes == 1000);
  CHECK(fs::exists(d.path() / "caches/pip/protected/p"));
  REQUIRE(removed.size() == 2);
  CHECK(removed[0].find("tier pr-1") != std::string::npos);
  CHECK(removed[1].find("2 least recently used") != std::string::npos);
}

namespace {

/// 50 C++ sources and a CMakeLists.txt: a library a build job compiles through ccache.
void write_cmake_project(const TempDir& d) {
  std::string lib = "cmake_minimum_required(VERSION 3.16)\nproject(fifty CXX)\nadd_library(fifty STATIC";
  for (int i = 0; i < 50; ++i) {
    lib += " s" + std::to_string(i) + ".cpp";
    d.write("proj/s" + std::to_string(i) + ".cpp", "#include <map>\n#include <string>\nint f" + std::to_string(i) +
                                                       "(int x) { std::map<std::string, int> m; m[\"k\"] = x; return m[\"k\"] + " +
                                                       std::to_string(i) + "; }\n");
  }
  d.write("proj/CMakeLists.txt", lib + ")\n");
}

/// Every file under `dir` with its content's hash, as root sees it.
std::map<std::string, std::string> hashes(const fs::path& dir) {
  std::string out;
  sh("cd " + dir.string() + " && find . -type f | sort | xargs -r sha256sum", &out);
  std::map<std::string, std::string> m;
  std::istringstream in(out);
  for (std::string h, f; in >> h >> f;) m[f] = h;
  return m;
}

/// The object files' hashes a build step printed ("OBJ <hash> <file>" lines in its log).
std::map<std::string, std::string> objects(const json& run) {
  std::map<std::string, std::string> m;
  std::istringstream in(read_file(run["jobs"][0]["steps"][0]["log_path"].get<std::string>()));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("OBJ ", 0) == 0) m[line.substr(4 + 65)] = line.substr(4, 64);
  return m;
}

}  // namespace

TEST_CASE("caches: a real CMake build of 50 sources through real ccache: main's first run is cold and its second hits, a "
          "pull request hits main's tier and recompiles only what it changed, and what it plants main never reads",
          "[caches][sandbox]") {
  SKIP_UNLESS_ROOT();
  REQUIRE(sh("command -v ccache >/dev/null && command -v cmake >/dev/null") == 0);
  Served s;
  open_to_sandbox(s.dir);
  const std::string group = "ptcg" + random_hex(3);
  SandboxUsers users(s.dir, 2, "caches:\n  group: " + group + "\n");
  REQUIRE(::getgrnam(group.c_str()) != nullptr);
  write_cmake_project(s.dir);
  const std::string proj = (s.dir.path() / "proj").string();
  write_project(s.dir, {{"build.yml", "name: build\ncaches: {ccache: CCACHE_DIR}\nsteps:\n  - name: build\n    run: |\n"
                                      "      cmake -S " + proj + " -B \"$RUNNER_TEMP/b\" -DCMAKE_BUILD_TYPE=Release "
                                      "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache > /dev/null\n"
                                      "      cmake --build \"$RUNNER_TEMP/b\" -j 2 > /dev/null\n"
                                      "      cd \"$RUNNER_TEMP/b\" && find . -name '*.o' | sort | xargs sha256sum | sed 's/^/OBJ /'\n"},
                        // A pull request's step writes wherever it can under its caches: every file of the protected
                        // tier, a new entry there, and a forged ccache result stored with a storage of its own making.
                        {"poison.yml", "name: poison\ncaches: {ccache: CCACHE_DIR}\nsteps:\n  - name: poison\n    run: |\n"
                                       "      tier=${CCACHE_REMOTE_STORAGE#file:}; tier=${tier%%|*}\n"
                                       "      wrote=0\n"
                                       "      for f in $(find \"$tier\" -type f); do echo forged >> \"$f\" 2>/dev/null && wrote=$((wrote+1)); done\n"
                                       "      touch \"$tier/planted\" 2>/dev/null && wrote=$((wrote+1))\n"
                                       "      for d in $(find \"$tier\" -type d); do touch \"$d/planted\" 2>/dev/null && wrote=$((wrote+1)); done\n"
                                       "      mkdir -p \"$RUNNER_TEMP/p\" && cp " + proj + "/s1.cpp \"$RUNNER_TEMP/p/s1.cpp\"\n"
                                       "      echo 'int forged() { return 666; }' >> \"$RUNNER_TEMP/p/s1.cpp\"\n"
                                       "      CCACHE_REMOTE_STORAGE=\"file:$tier\" CCACHE_REMOTE_ONLY=true ccache g++ -c \"$RUNNER_TEMP/p/s1.cpp\" "
                                       "-o \"$RUNNER_TEMP/p/s1.o\" 2>/dev/null || true\n"
                                       "      echo \"WROTE $wrote\"\n"}});
  s.start();
  auto build = [&](const std::string& ref) {
    json run = s.wait_run(s.submit_run({{"jobs", {"build"}}, {"ref", ref}}), 180);
    INFO(run.dump(2));
    INFO(read_file(run["jobs"][0]["steps"][0]["log_path"].get<std::string>()));
    REQUIRE(run["state"] == "succeeded");
    return run;
  };
  auto counts = [](const json& run) { return CacheCounts::from_json(run["caches"]["ccache"]); };

  const json main1 = build("refs/heads/main");
  CHECK(counts(main1).calls == 50);
  CHECK(counts(main1).misses == 50);
  const fs::path tier = fs::path(s.state()) / "caches/ccache/protected";
  struct stat st {};
  REQUIRE(::stat(tier.c_str(), &st) == 0);
  CHECK(st.st_uid == 0);
  CHECK(st.st_gid == ::getgrnam(group.c_str())->gr_gid);
  // What main's user wrote there is root's once its run ended: a user lent later to a pull request owns nothing.
  std::string owned;
  CHECK(wait_until([&] {  // the run's return, just after its end
    owned.clear();
    sh("find " + tier.string() + " ! -uid 0 | head -3", &owned);
    return owned.empty();
  }, 30));
  INFO(owned);

  const json main2 = build("refs/heads/main");
  CHECK(counts(main2).hits >= 48);  // >= 95%
  CHECK(counts(main2).remote_hits == counts(main2).hits);

  const json pr1 = build("refs/pull/7/head");
  CHECK(counts(pr1).hits >= 48);
  CHECK(counts(pr1).remote_hits == counts(pr1).hits);
  const fs::path own = fs::path(s.state()) / "caches/ccache/scopes/pr-7";
  CHECK(fs::is_directory(own));

  const std::string s0 = read_file(s.dir.path() / "proj/s0.cpp");
  s.dir.write("proj/s0.cpp", s0 + "int g0() { return 1; }\n");
  const json pr2 = build("refs/pull/7/head");
  CHECK(counts(pr2).misses == 1);  // only the changed file; the rest from its own tier now
  CHECK(counts(pr2).hits == 49);
  CHECK(counts(pr2).remote_hits == 0);
  s.dir.write("proj/s0.cpp", s0);

  const auto before = hashes(tier);
  json poison = s.wait_run(s.submit_run({{"jobs", {"poison"}}, {"ref", "refs/pull/8/head"}}), 120);
  INFO(poison.dump(2));
  REQUIRE(poison["state"] == "succeeded");
  CHECK(read_file(poison["jobs"][0]["steps"][0]["log_path"].get<std::string>()).find("WROTE 0") != std::string::npos);
  CHECK(hashes(tier) == before);  // nothing of the pull request's reached the protected tier

  const json main3 = build("refs/heads/main");
  CHECK(counts(main3).hits == 50);
  // Seen by on-call: hits and misses of every finished build, and the tiers' size once retention measured them.
  json caches;
  CHECK(wait_until([&] {
    caches = s.get("/api/v1/status")["caches"];
    return caches.contains("ccache") && caches["ccache"]["bytes"].get<double>() > 0;
  }, 20));
  INFO(caches.dump());
  CacheCounts all;
  for (const json* r : std::initializer_list<const json*>{&main1, &main2, &pr1, &pr2, &poison, &main3})
    if (r->contains("caches")) all += counts(*r);
  CHECK(caches["ccache"]["hits"] == all.hits);
  CHECK(caches["ccache"]["misses"] == all.misses);
  const std::string metrics = pto::api_request("GET", s.url("/metrics")).body;
  CHECK(metrics.find("pto_runner_cache_hits_total{cache=\"ccache\"} " + std::to_string(caches["ccache"]["hits"].get<long long>())) !=
        std::string::npos);
  CHECK(metrics.find("pto_runner_cache_bytes{cache=\"ccache\"}") != std::string::npos);
  CHECK(objects(main3) == objects(main1));  // the very objects of main's clean build
  CHECK(objects(main3).size() == 50);
}

namespace {

/// A real nginx serving WebDAV under /ccache/ on a free loopback port, taking PUT and DELETE only with the
/// credential (auth_basic with an htpasswd made by openssl), stopped by its pid at the end.
struct WebDav {
  TempDir dir;
  int port = free_tcp_port();
  std::string user = "builder", password = "pw" + random_hex(8);
  WebDav() {
    const std::string d = dir.str();
    fs::create_directories(dir.path() / "dav/ccache");
    REQUIRE(sh("chown -R nobody " + d + "/dav && chmod 0755 " + d) == 0);
    std::string hash;
    REQUIRE(sh("openssl passwd -apr1 '" + password + "'", &hash) == 0);
    dir.write("htpasswd", user + ":" + hash);
    dir.write("nginx.conf", "daemon on;\npid " + d + "/nginx.pid;\nerror_log " + d + "/error.log;\nevents {}\nhttp {\n"
                            "  access_log " + d + "/access.log;\n  client_body_temp_path " + d + "/body;\n"
                            "  proxy_temp_path " + d + "/proxy;\n  fastcgi_temp_path " + d + "/fcgi;\n  uwsgi_temp_path " + d + "/uwsgi;\n"
                            "  scgi_temp_path " + d + "/scgi;\n  server {\n    listen 127.0.0.1:" + std::to_string(port) + ";\n"
                            "    root " + d + "/dav;\n    location /ccache/ {\n      dav_methods PUT DELETE;\n"
                            "      create_full_put_path on;\n      limit_except GET HEAD { auth_basic \"ccache\"; auth_basic_user_file " +
                            d + "/htpasswd; }\n    }\n  }\n}\n");
    std::string out;
    INFO(out);
    REQUIRE(sh("nginx -p " + d + " -c " + d + "/nginx.conf 2>&1", &out) == 0);
  }
  ~WebDav() { sh("kill $(cat " + dir.str() + "/nginx.pid) 2>/dev/null"); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/ccache/"; }
  /// The access log's PUT requests with their status codes, in order.
  std::vector<int> puts() const {
    std::vector<int> codes;
    std::istringstream in(read_file(dir.path() / "access.log"));
    for (std::string line; std::getline(in, line);) {
      const auto at = line.find("\"PUT ");
      if (at == std::string::npos) continue;
      const auto end = line.find('"', at + 1);
      codes.push_back(std::stoi(line.substr(end + 2, 3)));
    }
    return codes;
  }
};

}  // namespace

TEST_CASE("caches: two hosts share main's ccache through a real nginx WebDAV remote: the second host's first main build "
          "hits it, and its pull requests read it but never write it, not even by PUTting to every URL they see",
          "[caches][sandbox]") {
  SKIP_UNLESS_ROOT();
  REQUIRE(sh("command -v ccache >/dev/null && command -v nginx >/dev/null && command -v curl >/dev/null") == 0);
  WebDav dav;
  TempDir shared;  // the project both hosts build (a commit's tree, as each host's checkout has it)
  open_to_sandbox(shared);
  write_cmake_project(shared);
  const std::string proj = (shared.path() / "proj").string();
  const std::string build_yml = "name: build\ncaches: {ccache: CCACHE_DIR}\nsteps:\n  - name: build\n    run: |\n"
                                "      cmake -S " + proj + " -B \"$RUNNER_TEMP/b\" -DCMAKE_BUILD_TYPE=Release "
                                "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache > /dev/null\n"
                                "      cmake --build \"$RUNNER_TEMP/b\" -j 2 > /dev/null\n";
  // A pull request's step PUTs to every http URL its ccache was given, without and with what it can guess.
  const std::string put_yml = "name: put\nsteps:\n  - name: put\n    caches: {ccache: CCACHE_DIR}\n    run: |\n"
                              "      echo forged > \"$RUNNER_TEMP/f\"\n"
                              "      for u in $(echo \"$CCACHE_REMOTE_STORAGE\" | grep -o 'http://[^| ]*'); do\n"
                              "        echo \"PUT $(curl -s -o /dev/null -w '%{http_code}' -T \"$RUNNER_TEMP/f\" \"${u}ab/forged\")\"\n"
                              "        echo \"PUT $(curl -s -o /dev/null -w '%{http_code}' -u builder:guess -T \"$RUNNER_TEMP/f\" \"${u}ab/forged2\")\"\n"
                              "      done\n";
  struct Host {
    Served s;
    std::unique_ptr<SandboxUsers> users;
    Host(const WebDav& dav, const std::string& build, const std::string& put) {
      open_to_sandbox(s.dir);
      const fs::path cred = s.dir.write("ccache-credential", dav.user + ":" + dav.password + "\n");
      REQUIRE(::chmod(cred.c_str(), 0600) == 0);
      users = std::make_unique<SandboxUsers>(s.dir, 1, "caches:\n  group: ptcr" + random_hex(3) + "\n  remote: {url: '" + dav.url() +
                                                           "', credential-file: " + cred.string() + "}\n");
      write_project(s.dir, {{"build.yml", build}, {"put.yml", put}});
      s.start();
    }
    json run(const std::string& job, const std::string& ref) {
      json r = s.wait_run(s.submit_run({{"jobs", {job}}, {"ref", ref}}), 180);
      INFO(r.dump(2));
      INFO(read_file(r["jobs"][0]["steps"][0]["log_path"].get<std::string>()));
      REQUIRE(r["state"] == "succeeded");
      return r;
    }
  };
  Host one(dav, build_yml, put_yml), two(dav, build_yml, put_yml);
  auto counts = [](const json& run) { return CacheCounts::from_json(run["caches"]["ccache"]); };

  const json cold = one.run("build", "refs/heads/main");
  CHECK(counts(cold).misses == 50);
  const std::vector<int> written = dav.puts();
  CHECK(std::count(written.begin(), written.end(), 201) >= 50);  // main wrote its results with the credential
  const std::string credential_log = read_file(cold["jobs"][0]["steps"][0]["log_path"].get<std::string>());
  CHECK(credential_log.find(dav.password) == std::string::npos);

  const json warm = two.run("build", "refs/heads/main");
  CHECK(counts(warm).hits >= 45);  // >= 90%, from the other host's results
  const std::size_t before_pr = dav.puts().size();
  const json pr = two.run("build", "refs/pull/9/head");
  CHECK(counts(pr).hits >= 45);
  const json put = two.run("put", "refs/pull/9/head");
  const std::string log = read_file(put["jobs"][0]["steps"][0]["log_path"].get<std::string>());
  INFO(log);
  CHECK(log.find("PUT 401") != std::string::npos);
  CHECK(log.find("PUT 201") == std::string::npos);
  CHECK(log.find("PUT 204") == std::string::npos);
  CHECK(log.find(dav.password) == std::string::npos);
  const std::vector<int> after = dav.puts();
  REQUIRE(after.size() >= before_pr + 2);  // the step's attempts reached the server
  for (std::size_t i = before_pr; i < after.size(); ++i) CHECK(after[i] == 401);  // and nothing of the pull request's was taken
  CHECK_FALSE(fs::exists(dav.dir.path() / "dav/ccache/ccache/ab/forged"));
}
