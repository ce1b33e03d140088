#include "util/owned_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace pto {

std::string make_owned_dir(const std::string& dir, mode_t mode, long long uid, long long gid) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create " + dir + ": " + ec.message();
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return dir + " is not a directory";
  const uid_t u = uid < 0 ? st.st_uid : static_cast<uid_t>(uid);
  const gid_t g = gid < 0 ? st.st_gid : static_cast<gid_t>(gid);
  if ((st.st_uid != u || st.st_gid != g) && ::lchown(dir.c_str(), u, g) != 0) return "cannot chown " + dir + ": " + std::strerror(errno);
  if ((st.st_mode & 07777) != mode && ::chmod(dir.c_str(), mode) != 0) return "cannot chmod " + dir + ": " + std::strerror(errno);
  return "";
}

}  // namespace pto
