#include "toolchain/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <unistd.h>
#include <set>

namespace fs = std::filesystem;

namespace pto {

namespace {

struct ReadFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct WriteFree {
  void operator()(archive* a) const { archive_write_free(a); }
};

// "./a/./b" -> "a/b"; "" for the root itself; nullopt for absolute paths or any ".." component.
std::optional<std::string> clean_relative(const std::string& raw) {
  if (raw.empty() || raw[0] == '/') return std::nullopt;
  std::string out;
  std::size_t pos = 0;
  while (pos <= raw.size()) {
    std::size_t slash = raw.find('/', pos);
    if (slash == std::string::npos) slash = raw.size();
    std::string part = raw.substr(pos, slash - pos);
    pos = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") return std::nullopt;
    out += (out.empty() ? "" : "/") + part;
  }
  return out;
}

// Whether `target` (a symlink's text) seen from the link's directory stays inside the root, lexically.
bool symlink_inside(const std::string& entry, const std::string& target) {
  if (target.empty() || target[0] == '/') return false;
  fs::path p = fs::path(entry).parent_path() / target;
  int depth = 0;
  for (const auto& part : p) {
    std::string s = part.string();
    if (s == "." || s.empty()) continue;
    depth += s == ".." ? -1 : 1;
    if (depth < 0) return false;
  }
  return true;
}

bool inside(const fs::path& root, const fs::path& p) {
  auto r = root.begin(), i = p.begin();
  for (; r != root.end(); ++r, ++i)
    if (i == p.end() || *r != *i) return false;
  return true;
}

}  // namespace

ExtractResult extract_archive(const std::string& archive_path, const std::string& root_in,
                              const ExtractLimits& limits) {
  ExtractResult res;
  std::error_code ec;
  const fs::path root = fs::canonical(root_in, ec);  // no symlinks in the prefix: SECURE_SYMLINKS checks it
  if (ec) {
    res.error = "install root " + root_in + ": " + ec.message();
    return res;
  }
  std::unique_ptr<archive, ReadFree> in(archive_read_new());
  archive_read_support_format_tar(in.get());
  archive_read_support_format_zip(in.get());
  archive_read_support_filter_all(in.get());
  if (archive_read_open_filename(in.get(), archive_path.c_str(), 1 << 16) != ARCHIVE_OK) {
    res.error = "archive " + archive_path + " cannot be read (damaged or truncated?): " + archive_error_string(in.get());
    return res;
  }
  std::unique_ptr<archive, WriteFree> out(archive_write_disk_new());
  // Our own checks come first; libarchive's secure flags are the second line (never write through a symlink).
  archive_write_disk_set_options(out.get(), ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
                                                ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT);
  std::set<std::string> regular_files;
  auto fail = [&](const std::string& entry, const std::string& why) {
    res.ok = false;
    res.error = "archive " + archive_path + ": entry '" + entry + "' " + why;
    return res;
  };
  archive_entry* e = nullptr;
  while (true) {
    int r = archive_read_next_header(in.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      res.error = "archive " + archive_path + " is damaged or truncated: " + archive_error_string(in.get());
      return res;
    }
    const char* raw_name = archive_entry_pathname(e);
    std::string name = raw_name ? raw_name : "";
    if (++res.entries > limits.max_entries)
      return fail(name, "is past the cap of " + std::to_string(limits.max_entries) + " entries");
    auto rel = clean_relative(name);
    if (!rel) return fail(name, name.size() && name[0] == '/' ? "has an absolute path" : "has a '..' component");
    if (rel->empty()) continue;  // "./" itself
    const mode_t type = archive_entry_filetype(e);
    const char* hardlink = archive_entry_hardlink(e);
    if (hardlink) {
      auto target = clean_relative(hardlink);
      if (!target || !regular_files.count(*target))
        return fail(name, std::string("is a hardlink to '") + hardlink + "', which is not a file extracted inside the root");
      archive_entry_set_hardlink(e, (root / *target).c_str());
    } else if (type == AE_IFLNK) {
      const char* t = archive_entry_symlink(e);
      if (!t || !symlink_inside(*rel, t))
        return fail(name, std::string("is a symlink to '") + (t ? t : "") + "', outside the install root");
    } else if (type != AE_IFREG && type != AE_IFDIR) {
      return fail(name, "is a device file, fifo or socket; only files, directories and links are allowed");
    }
    if (type == AE_IFREG && !hardlink) regular_files.insert(*rel);
    archive_entry_set_pathname(e, (root / *rel).c_str());
    archive_entry_set_uid(e, getuid());
    archive_entry_set_gid(e, getgid());
    r = archive_write_header(out.get(), e);
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) return fail(name, std::string("cannot be written: ") + archive_error_string(out.get()));
    const void* buf;
    size_t size;
    la_int64_t offset;
    while ((r = archive_read_data_block(in.get(), &buf, &size, &offset)) == ARCHIVE_OK) {
      res.bytes += static_cast<long long>(size);
      if (res.bytes > limits.max_bytes)
        return fail(name, "takes the archive past the size cap of " + std::to_string(limits.max_bytes >> 20) + " MiB");
      if (res.bytes > (16LL << 20)) {
        long long read = std::max<long long>(1, archive_filter_bytes(in.get(), -1));
        if (static_cast<double>(res.bytes) > limits.max_ratio * static_cast<double>(read))
          return fail(name, "expands " + std::to_string(res.bytes / read) + " times (" + std::to_string(res.bytes >> 20) +
                                " MiB out of " + std::to_string(read >> 10) + " KiB read), past the limit of " +
                                std::to_string(static_cast<long long>(limits.max_ratio)) +
                                ": refused as a decompression bomb");
      }
      if (archive_write_data_block(out.get(), buf, size, offset) != ARCHIVE_OK)
        return fail(name, std::string("cannot be written: ") + archive_error_string(out.get()));
    }
    if (r != ARCHIVE_EOF) {
      res.error = "archive " + archive_path + " is damaged or truncated at '" + name + "': " + archive_error_string(in.get());
      return res;
    }
    if (archive_write_finish_entry(out.get()) != ARCHIVE_OK)
      return fail(name, std::string("cannot be finished: ") + archive_error_string(out.get()));
  }
  if (archive_write_close(out.get()) != ARCHIVE_OK) {
    res.error = std::string("extracting ") + archive_path + ": " + archive_error_string(out.get());
    return res;
  }
  // The physical check: every symlink of the finished tree, resolved through any other links, stays inside.
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_symlink()) continue;
    std::error_code rec;
    fs::path resolved = fs::weakly_canonical(it->path(), rec);
    if (rec || !inside(root, resolved))
      return fail(fs::relative(it->path(), root).string(), "resolves to '" + resolved.string() + "', outside the install root");
  }
  res.ok = true;
  return res;
}

}  // namespace pto
