// MOE_MEGA_HD: __host__ __device__ where nvcc compiles, nothing elsewhere, for cutlass_mega's plain
// C++ helpers that the kernel and the host tests share (kernels/split.hpp, kernels/fragments.hpp).
#pragma once

#ifdef __CUDACC__
#define MOE_MEGA_HD __host__ __device__
#else
#define MOE_MEGA_HD
#endif
