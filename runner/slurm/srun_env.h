#pragma once
// The environment srun itself reads, kept from the srun pto-runner starts (a step's, by the Slurm executor; a
// lease's, by the task-submit client): an inherited SLURM_JOB_ID would make srun start a step inside someone
// else's allocation (the wrapper would read that job's cards, and a cancel end it), and SLURM_ACCOUNT or
// SLURM_QOS in a workflow's env: would pass slurm.args by. Only where the cluster is passes; Slurm sets the
// job's own SLURM_* for the command. Header-only: the task-submit binary links no core library.
#include <string>

namespace pto {

inline bool srun_reads(const std::string& kv) {
  for (const char* p : {"SLURM_", "SRUN_", "SALLOC_", "SBATCH_"})
    if (kv.rfind(p, 0) == 0) return kv.rfind("SLURM_CONF=", 0) != 0 && kv.rfind("SLURM_CLUSTERS=", 0) != 0;
  return false;
}

}  // namespace pto
