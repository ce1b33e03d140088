#include "toolchain/toolchain_setup.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "sched/device_pool.h"  // iso_now
#include "toolchain/archive.h"
#include "toolchain/fetch.h"
#include "toolchain/locate.h"
#include "exec/run_sync.h"
#include "util/process_env.h"
#include "util/lock_file.h"
#include "util/random_hex.h"
#include "util/sha256.h"

namespace fs = std::filesystem;

namespace pto {

namespace {

constexpr const char* kCompleteMarker = ".pto-runner-complete";

class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    // 0600, never through a link: a lock another user can open is one they can hold (util/lock_file).
    fd_ = open_private_lock_file(path, "the toolchain cache lock", error_);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      contended_ = true;
      if (::flock(fd_, LOCK_EX) != 0) ::close(fd_), fd_ = -1;  // wait for the other setup to finish
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  bool contended() const { return contended_; }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
  int fd_ = -1;
  bool contended_ = false;
};

std::string unique_suffix() {
  return std::to_string(getpid()) + "-" + random_hex(4);
}

std::string mirror_source(const std::string& mirror, const std::string& version, const std::string& artifact) {
  if (mirror.empty()) return "";
  std::string base = mirror;
  while (!base.empty() && base.back() == '/') base.pop_back();
  if (base.rfind("file://", 0) == 0 || base.rfind("http://", 0) == 0 || base.rfind("https://", 0) == 0)
    return base + "/" + version + "/" + artifact;
  return "file://" + fs::absolute(base).string() + "/" + version + "/" + artifact;
}

struct Context {
  const ToolchainRequest& req;
  ToolchainState st;
  std::string key, artifact, url, downloads, install_root, lock_path, log_dir;
  void log(const std::string& s) const {
    if (req.log) req.log(s);
  }
  ToolchainState fail(const std::string& e) {
    st.ok = false;
    st.error = e;
    return st;
  }
};

// Downloads into a temp file, checks the digest, and only then renames to the trusted name.
bool fetch_verified(Context& c, std::string& error) {
  std::vector<std::pair<std::string, std::string>> sources;
  if (std::string m = mirror_source(c.req.mirror, c.st.version, c.artifact); !m.empty()) sources.push_back({"mirror", m});
  sources.push_back({"release URL", c.url});
  FetchOptions fo;
  fo.retries = c.req.config.retries;
  fo.max_bytes = c.req.config.max_bytes;
  std::vector<std::string> problems;
  for (const auto& [what, src] : sources) {
    std::string tmp = c.st.archive + ".part-" + unique_suffix();
    c.log("fetching " + src);
    FetchResult f = fetch_url(src, tmp, fo);
    if (!f.ok) {
      std::error_code ec;
      fs::remove(tmp, ec);
      problems.push_back(what + ": " + f.error);
      continue;
    }
    auto digest = sha256_file_hex(tmp);
    if (!digest || *digest != c.st.sha256) {
      std::error_code ec;
      fs::remove(tmp, ec);
      problems.push_back(what + ": sha256 mismatch for " + src + ": expected " + c.st.sha256 + " (toolchain/versions.env), got " +
                         (digest ? *digest : std::string("unreadable")));
      continue;
    }
    std::error_code ec;
    fs::rename(tmp, c.st.archive, ec);
    if (ec) {
      fs::remove(tmp, ec);
      problems.push_back("cannot move the download to " + c.st.archive + ": " + ec.message());
      continue;
    }
    return true;
  }
  error = "cannot fetch PTOAS " + c.st.version + " (" + c.artifact + "):";
  for (const auto& p : problems) error += "\n  " + p;
  return false;
}

bool check_interpreter(Context& c, std::string& error) {
  const std::string& py = c.req.config.python;
  SyncResult v = run_sync({py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"}, environment_list(), 60,
                          c.log_dir + "/python-" + c.key + ".log");
  std::string have = v.output.substr(0, v.output.find('\n'));
  if (!v.outcome.ok() || have.empty()) {
    error = "the interpreter '" + py + "' (toolchain/ptoas.yml python:) cannot be run: " +
            (!v.output.empty() ? v.output.substr(0, 500) : !v.outcome.error.empty() ? v.outcome.error : "exit " + std::to_string(v.outcome.exit_code));
    return false;
  }
  std::vector<std::string> want = wheel_cpython_versions(c.artifact);
  if (!want.empty() && std::find(want.begin(), want.end(), have) == want.end()) {
    std::string wanted;
    for (const auto& w : want) wanted += (wanted.empty() ? "" : " or ") + w;
    error = "PTOAS " + c.st.version + " ships " + c.artifact + ", a wheel for CPython " + wanted + ", but '" + py +
            "' (toolchain/ptoas.yml python:) is Python " + have + "; name a Python " + wanted +
            " interpreter in toolchain/ptoas.yml `python:` (pip would only say the wheel is not supported)";
    return false;
  }
  return true;
}

bool install(Context& c, std::string& error) {
  std::error_code ec;
  fs::remove_all(c.install_root, ec);  // an install without its marker is never trusted
  if (c.req.config.kind == ArchiveKind::Whl) {
    // venv scripts embed their absolute path, so the venv is built in place; the marker, written last,
    // is what makes it trusted.
    std::string log = c.log_dir + "/install-" + c.key + ".log";
    if (!check_interpreter(c, error)) return false;  // before pip, and before anything is written
    const std::string& py = c.req.config.python;
    SyncResult venv = run_sync({py, "-m", "venv", "--system-site-packages", c.install_root}, environment_list(), 600, log);
    if (!venv.outcome.ok()) {
      error = py + " -m venv " + c.install_root + " failed: " + venv.output.substr(0, 2000);
      fs::remove_all(c.install_root, ec);
      return false;
    }
    SyncResult pip = run_sync({c.install_root + "/bin/python", "-m", "pip", "install", "--no-index", "--no-deps",
                               "--disable-pip-version-check", c.st.archive},
                              environment_list(), 600, log);
    if (!pip.outcome.ok()) {
      error = "pip install --no-index " + c.st.archive + " failed: " + pip.output.substr(0, 2000);
      fs::remove_all(c.install_root, ec);
      return false;
    }
  } else {
    std::string tmp = (fs::path(c.install_root).parent_path() / (".tmp-" + c.key + "-" + unique_suffix())).string();
    fs::create_directories(tmp, ec);
    ExtractResult x = extract_archive(c.st.archive, tmp, {c.req.config.max_bytes, c.req.config.max_entries, c.req.config.max_ratio});
    if (!x.ok) {
      fs::remove_all(tmp, ec);
      error = x.error;
      return false;
    }
    fs::rename(tmp, c.install_root, ec);  // atomic: the root appears whole or not at all
    if (ec) {
      fs::remove_all(tmp, ec);
      error = "cannot move the install into " + c.install_root + ": " + ec.message();
      return false;
    }
  }
  std::string marker_tmp = c.install_root + "/" + kCompleteMarker + ".tmp";
  std::ofstream(marker_tmp) << c.st.sha256 << "\n";
  fs::rename(marker_tmp, c.install_root + "/" + kCompleteMarker, ec);
  return !ec;
}

ToolchainState run(const ToolchainRequest& req, bool allow_fetch) {
  Context c{req, {}, {}, {}, {}, {}, {}, {}, {}};
  c.st.version = req.pin.ptoas_version;
  c.st.sha256 = req.pin.sha256_for(req.arch);
  if (c.st.version.empty()) return c.fail("toolchain/versions.env: PTOAS_VERSION is not set");
  if (c.st.sha256.empty())
    return c.fail("toolchain/versions.env has no digest for " + req.arch + " (PTOAS_SHA256_" +
                  (req.arch == "aarch64" ? std::string("AARCH64") : std::string("X86_64")) + ")");
  c.key = c.st.version + "-" + c.st.sha256.substr(0, 12);
  c.artifact = req.config.artifact_name(c.st.version, req.arch);
  c.url = req.config.artifact_url(c.st.version, req.arch);
  const fs::path base = fs::path(req.cache_dir) / "ptoas";
  c.downloads = (base / "downloads" / c.st.version).string();
  c.install_root = (base / c.key).string();
  c.lock_path = (base / "locks" / (c.key + ".lock")).string();
  c.log_dir = (base / "logs").string();
  c.st.archive = c.downloads + "/" + c.artifact;
  std::error_code ec;
  for (const auto& d : {c.downloads, (base / "locks").string(), c.log_dir}) fs::create_directories(d, ec);
  if (ec) return c.fail("cannot create the toolchain cache under " + base.string() + ": " + ec.message());

  FileLock lock(c.lock_path);
  if (!lock.ok()) return c.fail(lock.error().empty() ? "cannot lock " + c.lock_path : lock.error());
  if (lock.contended()) c.log("another setup of " + c.key + " was in progress; waited for it");

  // Verify on every use: a cached archive that no longer matches is removed, with the install built from it.
  if (fs::exists(c.st.archive)) {
    auto digest = sha256_file_hex(c.st.archive);
    if (digest && *digest == c.st.sha256) {
      c.st.cache_hit = true;
    } else {
      c.log("cached " + c.st.archive + " does not match the pin (sha256 " + (digest ? *digest : "unreadable") +
            ", expected " + c.st.sha256 + "); removing it");
      fs::remove(c.st.archive, ec);
      fs::remove_all(c.install_root, ec);
    }
  }
  if (!c.st.cache_hit) {
    if (!allow_fetch) return c.fail("PTOAS " + c.st.version + " is not in the cache (" + c.st.archive + "); run `pto-runner toolchain setup`");
    std::string error;
    if (!fetch_verified(c, error)) return c.fail(error);
  }
  const std::string marker = c.install_root + "/" + kCompleteMarker;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!fs::exists(marker)) {
      if (!allow_fetch) return c.fail("PTOAS " + c.st.version + " is not installed at " + c.install_root);
      c.log("installing " + c.artifact + " into " + c.install_root);
      std::string error;
      if (!install(c, error)) return c.fail(error);
    }
    c.st.root = c.install_root;
    LocateResult loc = locate_executable(c.install_root, req.config.probe);
    if (!loc.ok) {
      if (attempt == 0 && allow_fetch && c.st.cache_hit) {  // a damaged install from an earlier run: rebuild once
        fs::remove_all(c.install_root, ec);
        continue;
      }
      fs::remove_all(c.install_root, ec);  // a failed install leaves nothing behind to trust or to fill the disk
      return c.fail(loc.error);
    }
    c.st.bin = loc.bin;
    SmokeResult smoke = smoke_check(loc.bin, req.config.smoke, req.pin.version_number(), c.log_dir + "/smoke-" + c.key + ".log",
                                    req.smoke_as);
    c.st.smoke_output = smoke.output;
    if (!smoke.ok) {
      if (attempt == 0 && allow_fetch && c.st.cache_hit) {
        fs::remove_all(c.install_root, ec);
        continue;
      }
      fs::remove_all(c.install_root, ec);
      return c.fail(smoke.error);
    }
    c.st.ok = true;
    c.st.verified_at = iso_now();
    return c.st;
  }
  return c.fail("PTOAS install at " + c.install_root + " keeps failing its checks");
}

}  // namespace

// The CPython versions a wheel's file name says it runs on ("cp310" -> 3.10; "py3" -> any): pip refuses a
// mismatch with "not a supported wheel on this platform", which does not say the interpreter is wrong.
std::vector<std::string> wheel_cpython_versions(const std::string& artifact) {
  std::vector<std::string> parts;
  std::size_t pos = 0;
  std::string stem = artifact.substr(0, artifact.rfind(".whl"));
  while (true) {
    std::size_t dash = stem.find('-', pos);
    parts.push_back(stem.substr(pos, dash == std::string::npos ? std::string::npos : dash - pos));
    if (dash == std::string::npos) break;
    pos = dash + 1;
  }
  std::vector<std::string> out;
  if (parts.size() < 5) return out;
  std::string tags = parts[parts.size() - 3];
  std::size_t p = 0;
  while (p <= tags.size()) {
    std::size_t dot = tags.find('.', p);
    std::string t = tags.substr(p, dot == std::string::npos ? std::string::npos : dot - p);
    if (t.size() >= 4 && t.compare(0, 2, "cp") == 0) out.push_back(t.substr(2, 1) + "." + t.substr(3));
    else if (t.rfind("py", 0) == 0) return {};  // pure Python: any interpreter of that major version
    if (dot == std::string::npos) break;
    p = dot + 1;
  }
  return out;
}


ToolchainState setup_toolchain(const ToolchainRequest& req) { return run(req, req.allow_fetch); }
ToolchainState verify_toolchain(const ToolchainRequest& req) { return run(req, false); }

std::vector<std::pair<std::string, std::string>> toolchain_exports(const ToolchainState& s) {
  return {{"PTOAS_ROOT", s.root}, {"PTOAS_BIN", s.bin}, {"PTOAS_VERSION", s.version}, {"PTOAS_SHA256", s.sha256}};
}

}  // namespace pto
