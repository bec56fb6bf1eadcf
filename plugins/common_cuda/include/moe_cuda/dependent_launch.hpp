// Whether common_cuda's launches are programmatic dependent launches (PDL; docs/design.md §9,
// kernels/dependent_launch.cuh). Off by default until the GPU tests have run with it on: MOE_PDL=1
// in the environment at the first launch turns it on, set_dependent_launch() overrides either.
// Each plugin links its own copy of common_cuda, so the switch is per library copy.
#pragma once

namespace moe::gpu {

bool dependent_launch_enabled();
void set_dependent_launch(bool on);

}  // namespace moe::gpu
