// prepare() as its steps, one after the other, each returning a fresh copy of every tensor: the
// definition that prepare()'s one-pass gather (gather.hpp) is tested against, and the order that
// unprepare() undoes. The steps and why they come in this order: prepare.hpp.
#pragma once

#include "prepare.hpp"

namespace moe::trtllm {

// Same result as prepare(shape, canonical, options) for valid input, byte for byte; costs a copy
// of the layer per step. For tests and for reading, not for loading models.
PreparedLayer prepare_step_by_step(const LayerShape& shape, const LayerTensors& canonical,
                                   const PrepareOptions& options = {});

}  // namespace moe::trtllm
