// The C++ API of moe-registry: include this to discover plugins, pick one from a YAML config,
// prepare weights and run layers. Everything here is a thin layer over moe_abi.h.
#pragma once

#include "moe/abi/moe_abi.h"
#include "moe/checkpoint.hpp"
#include "moe/config.hpp"
#include "moe/conformance.hpp"
#include "moe/ep_plan.hpp"
#include "moe/inputs.hpp"
#include "moe/logging.hpp"
#include "moe/plugin.hpp"
#include "moe/registry.hpp"
#include "moe/runner.hpp"
#include "moe/safetensors.hpp"
#include "moe/safetensors_writer.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/host_tensor.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/selection.hpp"
