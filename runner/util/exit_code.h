#pragma once
// Every way a pto-runner command can end, as the spec numbers them.
namespace pto {

enum class ExitCode : int {
  Success = 0,
  Failure = 1,         // a step or job failed, or lint found errors
  BadInput = 2,        // bad usage or bad input files
  Infrastructure = 3,  // toolchain fetch/verify, device pool, server unreachable
  Interrupted = 130,   // SIGINT, after every step was cancelled and every card released
  Terminated = 143,    // SIGTERM, likewise
};

inline int to_int(ExitCode c) { return static_cast<int>(c); }

}  // namespace pto
