#pragma once
// The git commit this binary was built from ("unknown" outside a git checkout), for --version and the
// build_info metric. Defined in a file CMake generates (build_commit.cpp), so a new commit recompiles that
// one file, not every file that mentions it.
namespace pto {
extern const char* const kBuildCommit;
}
