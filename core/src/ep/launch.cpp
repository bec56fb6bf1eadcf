#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "moe/ep.hpp"
#include "moe/sdk/error.hpp"

namespace moe::ep {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int32_t int_env(const char* name, const char* launcher) {
  const char* v = env(name);
  MOE_CHECK(v != nullptr, MOE_STATUS_CONFIG_ERROR, "{} sets some of its variables but not {}",
            launcher, name);
  try {
    return std::stoi(v);
  } catch (...) {
    MOE_FAIL(MOE_STATUS_CONFIG_ERROR, "{}={} is not an integer", name, v);
  }
}

}  // namespace

Launch launch_from_env() {
  Launch l;
  struct Scheme {
    const char *launcher, *rank, *world, *local, *run_id;
  };
  constexpr Scheme kSchemes[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"},
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_MCA_ess_base_jobid"},
      {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID"},
  };
  for (const auto& s : kSchemes) {
    if (!env(s.rank) && !env(s.world)) continue;
    l.launcher = s.launcher;
    l.rank = int_env(s.rank, s.launcher);
    l.world = int_env(s.world, s.launcher);
    l.local_rank = env(s.local) ? int_env(s.local, s.launcher) : l.rank;
    l.run_id = env(s.run_id) ? env(s.run_id) : (env("MASTER_PORT") ? env("MASTER_PORT") : "");
    // The steps of one Slurm allocation share its job id: two at once would share a rendezvous.
    if (std::string(s.launcher) == "srun" && env("SLURM_STEP_ID"))
      l.run_id += fmt::format(".{}", env("SLURM_STEP_ID"));
    MOE_CHECK(l.world >= 1 && l.rank >= 0 && l.rank < l.world, MOE_STATUS_CONFIG_ERROR,
              "{}: rank {} is outside [0, world size {})", s.launcher, l.rank, l.world);
    return l;
  }
  return l;
}

void pin_local_device(const Launch& l) {
  if (l.world == 1) return;
  const char* visible = env("CUDA_VISIBLE_DEVICES");
  std::string mine = std::to_string(l.local_rank);
  if (visible) {
    std::string list(visible);
    if (list.find(',') == std::string::npos) return;  // already one device
    size_t start = 0;
    for (int32_t i = 0; i < l.local_rank; ++i) {
      start = list.find(',', start);
      MOE_CHECK(start != std::string::npos, MOE_STATUS_CONFIG_ERROR,
                "local rank {} has no device in CUDA_VISIBLE_DEVICES={}", l.local_rank, visible);
      ++start;
    }
    mine = list.substr(start, list.find(',', start) - start);
  }
  setenv("CUDA_VISIBLE_DEVICES", mine.c_str(), 1);
}

}  // namespace moe::ep
