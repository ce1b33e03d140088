#pragma once
// What the runner and its spawner process (exec/spawner, exec/spawner_main) say to each other: one
// SOCK_SEQPACKET message per request with its descriptors beside it (SCM_RIGHTS), one per reply. Plain bytes,
// not JSON: the spawner is a small static program that links nothing else.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pto {

struct SpawnRequest {
  std::uint64_t id = 0;
  std::vector<std::string> argv;  // argv[0] is a path
  std::vector<std::string> env;
  std::string cwd;
  // The descriptors that come with it, in this order: the output (when has_out), the cgroup v2 directory
  // (when has_cgroup; the child is cloned into it), then also_count v1 `tasks` files (pids, memory).
  bool has_out = false;
  bool has_cgroup = false;
  std::uint32_t also_count = 0;
  bool drop = false;  // to uid, gid, groups
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::uint64_t max_processes = 0;

  std::size_t fd_count() const { return (has_out ? 1 : 0) + (has_cgroup ? 1 : 0) + also_count; }
};

/// The child's pid once it has exec'd; or pid -1 (nothing started) or a pid that never exec'd (the runner,
/// its parent, reaps it) with `error` an errno.
struct SpawnReply {
  std::uint64_t id = 0;
  std::int32_t pid = -1;
  std::int32_t error = 0;
};

std::string encode_spawn_request(const SpawnRequest& r);
/// False when `bytes` is not a whole request.
bool decode_spawn_request(std::string_view bytes, SpawnRequest& r);

/// Sends `bytes` with `fds` as one message; the errno, or 0.
int send_message(int sock, std::string_view bytes, const std::vector<int>& fds);
/// Receives one message into `buf` (at most `cap` bytes) and its descriptors (close-on-exec, the caller's to
/// close): the byte count, 0 at the peer's end, -1 with errno. `cut` says why a message was not received
/// whole (0 when it was): EMSGSIZE, longer than `cap`; EMFILE, its descriptors did not all fit.
ssize_t receive_message(int sock, char* buf, std::size_t cap, std::vector<int>& fds, int& cut);

}  // namespace pto
