#include "exec/open_files.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <utility>

namespace pto {

std::string FileUser::describe() const {
  return "pid " + std::to_string(pid) + " (" + (comm.empty() ? "?" : comm) + ") has " + path + " open";
}

std::vector<FileUser> processes_with_open(const std::vector<std::string>& paths) {
  std::vector<std::pair<std::pair<dev_t, ino_t>, std::string>> wanted;
  for (const auto& p : paths) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) wanted.push_back({{st.st_dev, st.st_ino}, p});
  }
  std::vector<FileUser> out;
  if (wanted.empty()) return out;
  const int self = static_cast<int>(::getpid());
  DIR* proc = ::opendir("/proc");
  if (!proc) return out;
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end || pid <= 0 || pid == self) continue;
    const std::string fd_dir = "/proc/" + std::string(e->d_name) + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (!fds) continue;  // gone, or not ours to read
    bool found = false;
    while (dirent* f = ::readdir(fds)) {
      if (f->d_name[0] == '.') continue;
      struct stat st {};
      if (::stat((fd_dir + "/" + f->d_name).c_str(), &st) != 0) continue;
      for (const auto& [id, path] : wanted)
        if (id.first == st.st_dev && id.second == st.st_ino) {
          FileUser u;
          u.pid = static_cast<int>(pid);
          u.path = path;
          std::ifstream comm("/proc/" + std::string(e->d_name) + "/comm");
          std::getline(comm, u.comm);
          out.push_back(std::move(u));
          found = true;
          break;
        }
      if (found) break;
    }
    ::closedir(fds);
  }
  ::closedir(proc);
  return out;
}

}  // namespace pto
