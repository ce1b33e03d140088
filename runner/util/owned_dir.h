#pragma once
// A directory made for someone: the run's tree for its sandbox user (sandbox/run_tree), a cache's tier
// (caches/cache_tiers). Made with its parents, then checked to be a directory and not a link planted where one
// was expected, and only then given its owner and mode (lchown, chmod of what is there).
#include <sys/types.h>

#include <string>

namespace pto {

/// `dir` as a directory of `uid`:`gid` (-1: the owner it has) with `mode`. "" or what is wrong.
std::string make_owned_dir(const std::string& dir, mode_t mode, long long uid = -1, long long gid = -1);

}  // namespace pto
