// What a commit's .gitmodules may name (source/submodule_urls): URLs resolved as git resolves them, checked
// against source.submodule-urls (default: the source repository's host); local paths refused unless listed.
#include <catch2/catch.hpp>

#include "source/submodule_urls.h"

using namespace pto;

TEST_CASE("submodule urls: relative URLs resolve against the superproject's URL as git does", "[source]") {
  CHECK(resolve_submodule_url("https://github.com/hw-native-sys/pypto.git", "../simpler.git") == "https://github.com/hw-native-sys/simpler.git");
  CHECK(resolve_submodule_url("https://github.com/hw-native-sys/pypto", "./runtime") == "https://github.com/hw-native-sys/pypto/runtime");
  CHECK(resolve_submodule_url("https://github.com/hw-native-sys/pypto", "../../other/x") == "https://github.com/other/x");
  CHECK(resolve_submodule_url("https://github.com/a/b", "../../../x").empty());  // above the host
  CHECK(resolve_submodule_url("git@github.com:org/repo.git", "../lib.git") == "git@github.com:org/lib.git");
  CHECK(resolve_submodule_url("/srv/git/pypto", "../lib") == "/srv/git/lib");
  CHECK(resolve_submodule_url("https://x/y", "https://gitee.com/z") == "https://gitee.com/z");  // absolute: as written
}

TEST_CASE("submodule urls: the default allows the source repository's host only, and local paths need a listed directory",
          "[source]") {
  const auto github = default_submodule_urls("https://github.com/hw-native-sys/pypto");
  CHECK(github == std::vector<std::string>{"https://github.com/"});
  CHECK_FALSE(refused_submodule_url("https://github.com/hw-native-sys/simpler.git", github));
  CHECK(refused_submodule_url("https://gitee.com/x/y.git", github));
  auto local = refused_submodule_url("/root/secret-repo", github);
  REQUIRE(local);
  CHECK(local->find("a path on the daemon's host") != std::string::npos);
  CHECK(refused_submodule_url("file:///root/secret-repo", github));
  CHECK(refused_submodule_url("./relative", github));
  CHECK(default_submodule_urls("/srv/git/pypto").empty());  // a local repository allows no local path by default
  CHECK(default_submodule_urls("git@github.com:org/repo.git") == std::vector<std::string>{"git@github.com:"});
  // A listed directory allows what is under it, not a sibling that starts with the same letters.
  const std::vector<std::string> mirrors = {"/srv/mirrors"};
  CHECK_FALSE(refused_submodule_url("/srv/mirrors/simpler", mirrors));
  CHECK(refused_submodule_url("/srv/mirrors-private/keys", mirrors));
  CHECK(refused_submodule_url("-uhttps://evil", {"-"}));
}
