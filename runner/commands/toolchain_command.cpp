#include <filesystem>
#include <functional>
#include <fstream>
#include <pwd.h>

#include <iostream>

#include "commands/commands.h"
#include "config/versions_env.h"
#include "plan/plan.h"
#include "report/diagnostics_view.h"
#include "toolchain/toolchain_setup.h"

namespace fs = std::filesystem;

namespace pto {

namespace {

struct ToolchainOpts {
  std::string arch, cache_dir, mirror, output_env, smoke_as;
};

// Reads only what the lead job needs (versions.env, ptoas.yml, runner.yml): a broken job file elsewhere must
// not stop the toolchain from being set up or verified.
bool load_request(const CommonOptions& common, const ToolchainOpts& o, ToolchainRequest& req) {
  Diagnostics diags;
  const fs::path root(common.load.root);
  req.pin = load_versions_env((root / "toolchain/versions.env").string(), "toolchain/versions.env", diags);
  if (fs::exists(root / "toolchain/ptoas.yml"))
    req.config = load_toolchain_config((root / "toolchain/ptoas.yml").string(), "toolchain/ptoas.yml", diags);
  // The lead job of a run gets --cache-dir (and --mirror) from the host settings the engine already loaded;
  // then runner.yml is not read: under a commit under test, ROOT/runner.yml belongs to the pull request.
  RunnerConfig runner;
  std::string cfg = common.load.config_file;
  if (cfg.empty() && o.cache_dir.empty() && fs::exists(root / "runner.yml")) cfg = (root / "runner.yml").string();
  if (!cfg.empty()) runner = load_runner_config(cfg, cfg, diags);
  if (diags.has_errors()) {
    diags.sort();
    std::cerr << diagnostics_to_text(diags);
    return false;
  }
  req.arch = o.arch.empty() ? host_arch() : o.arch;
  req.cache_dir = resolve_under_root(common.load.root, o.cache_dir.empty() ? runner.cache_dir : o.cache_dir);
  req.mirror = o.mirror.empty() ? runner.toolchain_mirror : o.mirror;
  if (req.mirror.find("://") == std::string::npos) req.mirror = resolve_under_root(common.load.root, req.mirror);
  req.log = [](const std::string& s) { std::cerr << "toolchain: " << s << "\n"; };
  if (!o.smoke_as.empty()) {
    const passwd* pw = ::getpwnam(o.smoke_as.c_str());
    if (!pw) {
      std::cerr << "pto-runner toolchain: --smoke-as " << o.smoke_as << ": no such user\n";
      return false;
    }
    req.smoke_as = RunAs{o.smoke_as, pw->pw_uid, pw->pw_gid, {}};
    // The lead job runs as root in the commit's tree: the interpreter it runs (and makes the venv with) must be
    // the host's, a name on PATH or an absolute path outside that tree, never one the commit brings.
    const std::string& py = req.config.python;
    if (py.find('/') != std::string::npos) {
      const fs::path abs = fs::weakly_canonical(fs::absolute(root / py));
      const fs::path tree = fs::weakly_canonical(fs::absolute(root));
      const auto rel = abs.lexically_relative(tree);
      if (py.front() != '/' || (!rel.empty() && *rel.begin() != "..")) {
        std::cerr << "toolchain/ptoas.yml: python: '" << py << "' is inside the commit's tree; a sandboxed run's lead job runs only "
                  << "the host's interpreter (a name on PATH, or an absolute path outside the tree)\n";
        return false;
      }
    }
  }
  return true;
}

int report(const ToolchainState& st, const ToolchainOpts& o) {
  if (!st.ok) {
    std::cerr << "pto-runner toolchain: " << st.error << "\n";
    return to_int(ExitCode::Infrastructure);
  }
  std::string lines;
  for (const auto& [k, v] : toolchain_exports(st)) lines += k + "=" + v + "\n";
  std::cout << lines;
  if (!o.output_env.empty()) {
    std::string tmp = o.output_env + ".tmp";
    { std::ofstream(tmp) << lines; }
    std::error_code ec;
    fs::rename(tmp, o.output_env, ec);
    if (ec) {
      std::cerr << "pto-runner toolchain: cannot write " << o.output_env << ": " << ec.message() << "\n";
      return to_int(ExitCode::Infrastructure);
    }
  }
  std::cerr << "toolchain: PTOAS " << st.version << " " << (st.cache_hit ? "(cache hit, re-verified)" : "(installed)")
            << " at " << st.bin << "; smoke check: " << st.smoke_output.substr(0, st.smoke_output.find('\n')) << "\n";
  return 0;
}

}  // namespace

void register_toolchain_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  auto o = std::make_shared<ToolchainOpts>();
  auto* cmd = app.add_subcommand("toolchain", "The PTOAS lead job: setup, verify, locate, outputs");
  add_footer(*cmd, "0 done; 2 bad toolchain files (toolchain/ptoas.yml, versions.env); 3 fetch, digest, install, locate or "
                   "smoke check failed (verify and locate never fetch).");
  cmd->require_subcommand(1);
  auto add_opts = [&](CLI::App* sub) {
    sub->add_option("--arch", o->arch, "x86_64 or aarch64 (default: uname -m)");
    sub->add_option("--cache-dir", o->cache_dir, "Download and install cache (default: runner.yml cache-dir)");
    sub->add_option("--mirror", o->mirror, "Directory or file:// URL holding {version}/{artifact}, tried first");
    sub->add_option("--smoke-as", o->smoke_as, "Run the smoke check (what was downloaded, run first) as this user (a daemon passes "
                                               "the run's sandbox user)");
  };
  // setup, verify and locate differ only in what they do once the request is loaded.
  auto with_request = [o, &common, &exit_code](std::function<int(const ToolchainRequest&)> act) {
    return [o, &common, &exit_code, act] {
      ToolchainRequest req;
      exit_code = load_request(common, *o, req) ? act(req) : to_int(ExitCode::BadInput);
    };
  };
  auto* setup = cmd->add_subcommand("setup", "Fetch (mirror, then URL), verify, install, locate and smoke-check the pin");
  add_opts(setup);
  setup->add_option("--output-env", o->output_env, "Also write PTOAS_ROOT/BIN/VERSION/SHA256 lines to this file");
  add_footer(*setup, "0 ready; 2 bad toolchain files; 3 fetch, digest, install, locate or smoke check failed.");
  setup->callback(with_request([o](const ToolchainRequest& req) { return report(setup_toolchain(req), *o); }));
  auto* verify = cmd->add_subcommand("verify", "Re-verify the cached pin (digest, install, locate, smoke); never fetches");
  add_opts(verify);
  verify->callback(with_request([o](const ToolchainRequest& req) { return report(verify_toolchain(req), *o); }));
  auto* locate = cmd->add_subcommand("locate", "Print the installed pin's executable (PTOAS_BIN); never fetches");
  add_opts(locate);
  locate->callback(with_request([](const ToolchainRequest& req) {
    ToolchainState st = verify_toolchain(req);
    if (!st.ok) {
      std::cerr << "pto-runner toolchain: " << st.error << "\n";
      return to_int(ExitCode::Infrastructure);
    }
    std::cout << st.bin << "\n";
    return 0;
  }));
  auto* outputs = cmd->add_subcommand("outputs", "Print ptoas_version=, ptoas_sha256_aarch64=, ptoas_sha256_x86_64= for $GITHUB_OUTPUT");
  outputs->callback([&common, &exit_code] {
    Diagnostics diags;
    VersionsEnv pin = load_versions_env((fs::path(common.load.root) / "toolchain/versions.env").string(),
                                        "toolchain/versions.env", diags);
    if (diags.has_errors()) {
      diags.sort();
      std::cerr << diagnostics_to_text(diags);
      exit_code = to_int(ExitCode::BadInput);
      return;
    }
    std::cout << "ptoas_version=" << pin.ptoas_version << "\nptoas_sha256_aarch64=" << pin.sha256_for("aarch64")
              << "\nptoas_sha256_x86_64=" << pin.sha256_for("x86_64") << "\n";
    exit_code = 0;
  });
}

}  // namespace pto
