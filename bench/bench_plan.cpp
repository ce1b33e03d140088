// Load and plan N job files of S steps each (default 1,000 x 20), written to a temp dir.
// Prints the wall time of load_project + build_plan, and, as a baseline in the same process, the time to
// merely parse the same files with yaml-cpp, so the figure reads as "our overhead over parsing".
#include <algorithm>
#include <chrono>
#include <vector>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "config/project.h"
#include "plan/plan.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  int jobs = argc > 1 ? std::atoi(argv[1]) : 1000;
  int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  fs::path root = fs::temp_directory_path() / ("pto-bench-plan-" + std::to_string(getpid()));
  fs::create_directories(root / "jobs");
  fs::create_directories(root / "toolchain");
  std::ofstream(root / "toolchain/versions.env")
      << "PTOAS_VERSION=v0.52\nPTOAS_SHA256_AARCH64=" << std::string(64, 'a') << "\nPTOAS_SHA256_X86_64="
      << std::string(64, 'b') << "\n";
  for (int j = 0; j < jobs; ++j) {
    std::ofstream f(root / "jobs" / ("job-" + std::to_string(j) + ".yml"));
    f << "name: job-" << j << "\n";
    if (j > 0) f << "needs: [job-" << (j - 1) / 2 << "]\n";
    f << "parallel: true\nenv: {A: b}\nsteps:\n";
    for (int s = 0; s < steps; ++s)
      f << "  - name: step " << s << "\n    run: |\n      echo job " << j << " step " << s
        << "\n      ./run-test --case " << s << "\n    devices: " << (s % 3) << "\n    timeout-minutes: 5\n";
  }
  // Alternate baseline and subject so machine noise hits both alike; report medians of 5 rounds.
  std::vector<double> parse_times, plan_times;
  std::size_t planned = 0, problems = 0;
  bool errors = false;
  for (int round = 0; round < 5; ++round) {
    auto t0 = Clock::now();
    for (const auto& e : fs::directory_iterator(root / "jobs")) (void)YAML::LoadFile(e.path().string());
    auto t1 = Clock::now();
    pto::Diagnostics diags;
    pto::LoadOptions opts;
    opts.root = root.string();
    pto::Project p = pto::load_project(opts, diags);
    pto::Plan plan = pto::build_plan(p, {}, diags);
    auto t2 = Clock::now();
    parse_times.push_back(std::chrono::duration<double>(t1 - t0).count());
    plan_times.push_back(std::chrono::duration<double>(t2 - t1).count());
    planned = 0;
    for (const auto& j : plan.jobs) planned += j.steps.size();
    problems = diags.items().size();
    errors = diags.has_errors();
  }
  fs::remove_all(root);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  double parse_s = median(parse_times), plan_s = median(plan_times);
  std::printf("jobs=%d steps_per_job=%d planned_steps=%zu diagnostics=%zu (median of 5 rounds)\n", jobs, steps,
              planned, problems);
  std::printf("yaml-cpp parse only (baseline): %.3f s\n", parse_s);
  std::printf("load_project + build_plan:       %.3f s  (%.2fx the bare parse)\n", plan_s, plan_s / parse_s);
  return errors ? 1 : 0;
}
