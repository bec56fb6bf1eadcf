// Activations of docs/design.md §5, in double, exactly as written there.
#pragma once

#include <cstdint>

#include "moe/abi/moe_abi.h"

namespace moe::reference {

double silu(double x);
double sigmoid(double x);
double gelu(double x, bool tanh_form);

// gemm1 holds GEMM1's output row: [gate (I) | up (I)] for gated activations, [I] for relu2.
// Writes the activated intermediate [I].
void apply_activation(const moe_problem& p, const double* gemm1, int64_t intermediate,
                      double* out /* out, [intermediate] */);

}  // namespace moe::reference
