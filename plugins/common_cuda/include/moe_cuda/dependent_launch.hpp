// Whether common_cuda's launches are programmatic dependent launches (PDL; docs/design.md §9,
// kernels/dependent_launch.cuh). On by default on an sm90 device (the GPU tests and conformance
// passed with it, bench/NOTES.md session 32); MOE_PDL=0 (or off, false) in the environment at the
// first launch turns it off, set_dependent_launch() overrides either.
// Each plugin links its own copy of common_cuda, so the switch is per library copy.
#pragma once

namespace moe::gpu {

bool dependent_launch_enabled();
void set_dependent_launch(bool on);
// Whether a value of MOE_PDL (null: unset) leaves dependent launches on: all but 0, off, false.
bool dependent_launch_allowed(const char* moe_pdl);

}  // namespace moe::gpu
