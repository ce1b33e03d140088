#pragma once
// A git repository laid out as a project (versions.env committed), committed to step by step: the commits
// a daemon with runner.yml `source:` runs (source and sandbox tests).
#include <catch2/catch.hpp>

#include "test_support.h"

namespace pto::test {

/// A git repository laid out as a project, committed to step by step (a commit with no change has its parent's
/// tree: a merge that brings nothing new, a reworded message).
struct SourceRepo {
  TempDir dir;
  std::string path() const { return (dir.path() / "repo").string(); }
  SourceRepo() {
    REQUIRE(sh("git init -q -b main " + path()) == 0);
    write("toolchain/versions.env", valid_versions_env());
  }
  void write(const std::string& rel, const std::string& content) const { dir.write("repo/" + rel, content); }
  void remove(const std::string& rel) const { fs::remove(fs::path(path()) / rel); }
  std::string commit(const std::string& message) const {
    std::string sha;
    REQUIRE(sh("cd " + path() + " && git add -A && git -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m '" +
               message + "' && git rev-parse HEAD", &sha) == 0);
    while (!sha.empty() && sha.back() == '\n') sha.pop_back();
    return sha;
  }
};

}  // namespace pto::test
