#include "activations.hpp"

#include <algorithm>
#include <cmath>

#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/error.hpp"

namespace moe::reference {

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

double silu(double x) {
  return x * sigmoid(x);
}

double gelu(double x, bool tanh_form) {
  if (tanh_form) {
    const double c = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

void apply_activation(const moe_problem& p, const double* gemm1, int64_t n, double* out) {
  const double limit = p.activation_limit, alpha = p.activation_alpha;
  const double* g = gemm1;
  const double* u = gemm1 + n;
  if (!known_activation(p.activation))
    MOE_REFUSE(MOE_REASON_ACTIVATION, "activation={} is not one this build knows", p.activation);
  switch (static_cast<moe_activation>(p.activation)) {
    case MOE_ACTIVATION_SILU_MUL:
      for (int64_t i = 0; i < n; ++i) out[i] = silu(g[i]) * u[i];
      return;
    case MOE_ACTIVATION_SILU_MUL_CLAMP:
      for (int64_t i = 0; i < n; ++i)
        out[i] = silu(std::min(g[i], limit)) * std::clamp(u[i], -limit, limit);
      return;
    case MOE_ACTIVATION_SWIGLU_OAI:
      for (int64_t i = 0; i < n; ++i) {
        const double gc = std::min(g[i], limit);
        const double uc = std::clamp(u[i], -limit, limit);
        out[i] = (uc + 1.0) * gc * sigmoid(alpha * gc);
      }
      return;
    case MOE_ACTIVATION_GELU_MUL:
      for (int64_t i = 0; i < n; ++i) out[i] = gelu(g[i], p.gelu_tanh != 0) * u[i];
      return;
    case MOE_ACTIVATION_RELU2:
      for (int64_t i = 0; i < n; ++i) {
        const double r = std::max(gemm1[i], 0.0);
        out[i] = r * r;
      }
      return;
  }
  MOE_REFUSE(MOE_REASON_ACTIVATION, "activation={} is not one this build knows", p.activation);
}

}  // namespace moe::reference
