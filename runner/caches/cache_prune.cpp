#include "caches/cache_prune.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

namespace fs = std::filesystem;

namespace pto {

namespace {

struct Entry {
  double mtime;
  std::uint64_t bytes;
  std::string path;
};

double mtime_of(const struct stat& st) { return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9; }

/// The files under `dir` (links are entries, never followed), and the newest change of any entry in it.
std::vector<Entry> files_of(const fs::path& dir, double& newest) {
  std::vector<Entry> out;
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0) newest = std::max(newest, mtime_of(st));
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end; !ec && it != end; it.increment(ec)) {
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    newest = std::max(newest, mtime_of(st));
    if (S_ISREG(st.st_mode)) out.push_back({mtime_of(st), static_cast<std::uint64_t>(st.st_size), it->path().string()});
  }
  return out;
}

}  // namespace

std::map<std::string, CacheUsage> prune_caches(const CachesConfig& cfg, double now, std::vector<std::string>& removed) {
  std::map<std::string, CacheUsage> usage;
  std::error_code ec;
  for (fs::directory_iterator c(cfg.dir, ec), end; !ec && c != end; c.increment(ec)) {
    if (!c->is_directory(ec) || c->is_symlink(ec)) continue;
    const std::string name = c->path().filename().string();
    CacheUsage& u = usage[name];
    std::vector<Entry> all;
    double unused = 0;
    all = files_of(c->path() / "protected", unused);
    std::error_code sec;
    for (fs::directory_iterator s(c->path() / "scopes", sec); !sec && s != end; s.increment(sec)) {
      double newest = 0;
      std::vector<Entry> files = files_of(s->path(), newest);
      if (now - newest > cfg.pr_max_age_days * 86400) {
        std::error_code rec;
        fs::remove_all(s->path(), rec);
        removed.push_back("cache " + name + ": tier " + s->path().filename().string() + " (unused for " +
                          std::to_string(static_cast<int>((now - newest) / 86400)) + " days)");
        continue;
      }
      ++u.scopes;
      all.insert(all.end(), files.begin(), files.end());
    }
    for (const Entry& e : all) u.bytes += e.bytes;
    if (u.bytes <= cfg.max_size) continue;
    // Least recently used first, down to 90% so that the next run does not prune again at once.
    std::sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return a.mtime < b.mtime; });
    const std::uint64_t target = cfg.max_size / 10 * 9;
    int gone = 0;
    for (const Entry& e : all) {
      if (u.bytes <= target || now - e.mtime < 600) break;
      std::error_code rec;
      if (fs::remove(e.path, rec)) {
        u.bytes -= e.bytes;
        ++gone;
      }
    }
    if (gone) removed.push_back("cache " + name + ": " + std::to_string(gone) + " least recently used file(s), past max-size");
  }
  return usage;
}

}  // namespace pto
