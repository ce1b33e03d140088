#include "exec/spawn_wire.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "util/fd_passing.h"

namespace pto {

namespace {

void put_u64(std::string& out, std::uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put_str(std::string& out, std::string_view s) {
  put_u64(out, s.size());
  out.append(s);
}

struct Reader {
  std::string_view in;
  bool ok = true;
  std::uint64_t u64() {
    std::uint64_t v = 0;
    if (in.size() < sizeof v) return ok = false, 0;
    std::memcpy(&v, in.data(), sizeof v);
    in.remove_prefix(sizeof v);
    return v;
  }
  std::string str() {
    std::uint64_t n = u64();
    if (!ok || n > in.size()) return ok = false, std::string();
    std::string s(in.substr(0, n));
    in.remove_prefix(n);
    return s;
  }
  std::vector<std::string> strs() {
    std::uint64_t n = u64();
    std::vector<std::string> v;
    if (!ok || n > in.size()) return ok = false, v;  // each string takes at least 8 bytes
    for (std::uint64_t i = 0; ok && i < n; ++i) v.push_back(str());
    return v;
  }
};

}  // namespace

std::string encode_spawn_request(const SpawnRequest& r) {
  std::string out;
  put_u64(out, r.id);
  put_u64(out, r.argv.size());
  for (const auto& a : r.argv) put_str(out, a);
  put_u64(out, r.env.size());
  for (const auto& e : r.env) put_str(out, e);
  put_str(out, r.cwd);
  put_u64(out, (r.has_out ? 1u : 0u) | (r.has_cgroup ? 2u : 0u) | (r.drop ? 4u : 0u));
  put_u64(out, r.also_count);
  put_u64(out, r.uid);
  put_u64(out, r.gid);
  put_u64(out, r.groups.size());
  for (gid_t g : r.groups) put_u64(out, g);
  put_u64(out, r.max_processes);
  return out;
}

bool decode_spawn_request(std::string_view bytes, SpawnRequest& r) {
  Reader in{bytes};
  r.id = in.u64();
  r.argv = in.strs();
  r.env = in.strs();
  r.cwd = in.str();
  std::uint64_t flags = in.u64();
  r.has_out = flags & 1;
  r.has_cgroup = flags & 2;
  r.drop = flags & 4;
  r.also_count = static_cast<std::uint32_t>(in.u64());
  r.uid = static_cast<uid_t>(in.u64());
  r.gid = static_cast<gid_t>(in.u64());
  std::uint64_t groups = in.u64();
  if (!in.ok || groups > in.in.size() / 8) return false;
  r.groups.clear();
  for (std::uint64_t i = 0; i < groups; ++i) r.groups.push_back(static_cast<gid_t>(in.u64()));
  r.max_processes = in.u64();
  return in.ok && in.in.empty() && !r.argv.empty() && r.also_count < 64;
}

int send_message(int sock, std::string_view bytes, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control;
  attach_fds(msg, control, fds);
  ssize_t n;
  do n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n < 0 ? errno : 0;
}

ssize_t receive_message(int sock, char* buf, std::size_t cap, std::vector<int>& fds, int& cut) {
  cut = 0;
  iovec iov{buf, cap};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 72)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  fds.clear();
  if (n < 0) return -1;
  collect_fds(msg, fds);
  // A message longer than `cap`, or descriptors cut off (this process at its descriptor limit).
  if (msg.msg_flags & MSG_TRUNC) cut = EMSGSIZE;
  else if (msg.msg_flags & MSG_CTRUNC) cut = EMFILE;
  return n;
}

}  // namespace pto
