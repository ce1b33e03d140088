// Unit tests of the small loaders: versions.env, device specs, runner.yml, ptoas.yml.
#include <catch2/catch.hpp>

#include "config/device_spec.h"
#include "config/runner_config.h"
#include "config/toolchain_config.h"
#include "config/versions_env.h"
#include "config/yaml_map.h"
#include "test_support.h"

using namespace pto::test;

TEST_CASE("versions.env: the real pin parses and keeps comments greppable", "[config]") {
  pto::Diagnostics d;
  auto env = pto::parse_versions_env(valid_versions_env(), "v.env", d);
  CHECK_FALSE(d.has_errors());
  CHECK(env.ptoas_version == "v0.52");
  CHECK(env.version_number() == "0.52");
  CHECK(env.sha256_for("x86_64") == "d24b81565ec3d3ead4b05d18d62e55d6e5dd56c7cd8dd243f041a6ed14024f75");
  CHECK(env.sha256_for("riscv64").empty());
}

TEST_CASE("versions.env: each malformed line is its own located error", "[config]") {
  pto::Diagnostics d;
  pto::parse_versions_env("PTOAS_VERSION=v0.52\n PTOAS_X=1\nPTOAS_SHA256_X86_64 =abc\nlower=1\n"
                          "PTOAS_SHA256_AARCH64=\"abc\"\nPTOAS_SHA256_X86_64=abc def\nPTOAS_SHA_256_X86_64=1\n",
                          "v.env", d);
  std::vector<std::pair<int, std::string>> got;
  for (const auto& x : d.items()) got.emplace_back(x.line, x.rule);
  CHECK(got == std::vector<std::pair<int, std::string>>{{2, "bad-value"},
                                                        {3, "bad-value"},
                                                        {4, "bad-value"},
                                                        {5, "bad-value"},
                                                        {6, "bad-value"},
                                                        {7, "unknown-key"},
                                                        {1, "missing-key"},
                                                        {1, "missing-key"}});
  CHECK(d.items()[5].message.find("did you mean 'PTOAS_SHA256_X86_64'?") != std::string::npos);
}

TEST_CASE("device specs: count, ranges, lists, groups", "[config]") {
  std::string err;
  CHECK(*pto::parse_device_spec("8", err) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(*pto::parse_device_spec("0-3", err) == std::vector<int>{0, 1, 2, 3});
  CHECK(*pto::parse_device_spec("5,4,0,1", err) == std::vector<int>{0, 1, 4, 5});
  CHECK(*pto::parse_device_spec("0-1,6", err) == std::vector<int>{0, 1, 6});
  CHECK_FALSE(pto::parse_device_spec("0,0", err));
  CHECK(err.find("listed twice") != std::string::npos);
  CHECK_FALSE(pto::parse_device_spec("3-1", err));
  CHECK_FALSE(pto::parse_device_spec("a", err));
  CHECK_FALSE(pto::parse_device_spec("0", err));
  auto g = pto::parse_device_groups("0,1;2,3", err);
  REQUIRE(g);
  CHECK(*g == std::vector<std::vector<int>>{{0, 1}, {2, 3}});
  CHECK(pto::check_device_groups({0, 1, 2, 3}, *g).empty());
  CHECK(pto::check_device_groups({0, 1}, *g) == "device 2 is in a group but not in the device ids");
  CHECK(pto::check_device_groups({0, 1, 2}, {{0, 1}, {1, 2}}) == "device 1 is in two groups");
  CHECK(pto::largest_gang({0, 1, 2, 3}, *g) == 2);
  CHECK(pto::largest_gang({0, 1, 2, 3}, {}) == 4);
}

TEST_CASE("runner.yml: every key read, bad ones located", "[config]") {
  TempDir t;
  auto ok = t.write("runner.yml", R"(devices:
  ids: [0, 1, 2, 3]
  groups: [[0, 1], [2, 3]]
  lock-dir: /tmp/locks
state-dir: st
listen: 127.0.0.1:9999
health: {infra-exit-codes: [99], check: "npu-smi info -i {device}", drain-after: 2}
)");
  pto::Diagnostics d;
  auto cfg = pto::load_runner_config(ok.string(), "runner.yml", d);
  CHECK_FALSE(d.has_errors());
  CHECK(cfg.device_ids.size() == 4);
  CHECK(cfg.device_groups.size() == 2);
  CHECK(cfg.lock_dir == "/tmp/locks");
  CHECK(cfg.health.drain_after == 2);
  CHECK(cfg.health.infra_exit_codes == std::vector<int>{99});

  auto bad = t.write("bad.yml", "devices:\n  ids: [0, 1]\n  groups: [[0, 1, 2]]\nlisten: localhost\nstate_dir: x\n");
  pto::Diagnostics d2;
  pto::load_runner_config(bad.string(), "bad.yml", d2);
  REQUIRE(d2.items().size() == 3);
  d2.sort();
  CHECK(d2.items()[0].line == 3);
  CHECK(d2.items()[0].message.find("device 2 is in a group but not in the device ids") != std::string::npos);
  CHECK(d2.items()[1].rule == "bad-value");
  CHECK(d2.items()[2].message.find("did you mean 'state-dir'?") != std::string::npos);
}

TEST_CASE("ptoas.yml: templates expand and unknown placeholders are errors", "[config]") {
  TempDir t;
  auto f = t.write("ptoas.yml", "artifact: ptoas-{version_number}-{arch}.whl\nurl: https://x/{version}/{artifact}\n"
                                "kind: whl\n");
  pto::Diagnostics d;
  auto cfg = pto::load_toolchain_config(f.string(), "ptoas.yml", d);
  CHECK_FALSE(d.has_errors());
  CHECK(cfg.kind == pto::ArchiveKind::Whl);
  CHECK(cfg.artifact_url("v0.57", "aarch64") == "https://x/v0.57/ptoas-0.57-aarch64.whl");

  auto g = t.write("bad.yml", "artifact: ptoas-{ver}.tar.gz\nurl: ftp://x\nkind: rar\nprobe: [/bin/sh]\n");
  pto::Diagnostics d2;
  pto::load_toolchain_config(g.string(), "bad.yml", d2);
  CHECK(d2.items().size() == 4);
}

TEST_CASE("nearest_word suggests only plausible typos", "[config]") {
  CHECK(pto::nearest_word("timeout-minute", {"timeout-minutes", "name"}) == "timeout-minutes");
  CHECK(pto::nearest_word("contine-on-error", {"continue-on-error", "env"}) == "continue-on-error");
  CHECK(pto::nearest_word("banana", {"env", "run"}).empty());
}
