// StepGraph: a DeviceStep captured into a CUDA graph through the driver API (the core links no
// CUDA runtime; core/src/device/cuda_driver.hpp loads libcuda at run time).
#include "device/cuda_driver.hpp"
#include "moe/ep.hpp"
#include "moe/sdk/error.hpp"

namespace moe::ep {
using device::check_driver;

StepGraph::StepGraph(const DeviceStep& step, const moe_tensor& hidden, const moe_tensor& topk_ids,
                     const moe_tensor& topk_weights, const moe_tensor& output) {
  const device::CudaDriver& d = device::cuda_driver();
  MOE_CHECK(d.stream_create && d.stream_destroy && d.stream_begin_capture && d.stream_end_capture &&
                d.graph_instantiate && d.graph_launch && d.graph_exec_destroy && d.graph_destroy,
            MOE_STATUS_UNSUPPORTED,
            "the NVIDIA driver {} lacks stream capture or graph entries (CUDA 11.4 or later "
            "has them)",
            d.library);
  check_driver(d, d.stream_create(&stream_, device::kStreamNonBlocking), "cuStreamCreate");
  try {
    check_driver(d, d.stream_begin_capture(stream_, device::kCaptureThreadLocal),
                 "cuStreamBeginCapture");
    try {
      step.run(hidden, topk_ids, topk_weights, output, stream_);
    } catch (...) {
      void* broken = nullptr;
      d.stream_end_capture(stream_, &broken);  // leave the stream usable; drop what was captured
      if (broken) d.graph_destroy(broken);
      throw;
    }
    check_driver(d, d.stream_end_capture(stream_, &graph_), "cuStreamEndCapture");
    check_driver(d, d.graph_instantiate(&exec_, graph_, 0), "cuGraphInstantiateWithFlags");
  } catch (...) {
    if (graph_) d.graph_destroy(graph_);
    d.stream_destroy(stream_);
    throw;
  }
}

StepGraph::~StepGraph() {
  const device::CudaDriver& d = device::cuda_driver();
  if (stream_) d.stream_synchronize(stream_);
  if (exec_) d.graph_exec_destroy(exec_);
  if (graph_) d.graph_destroy(graph_);
  if (stream_) d.stream_destroy(stream_);
}

void StepGraph::launch() const {
  const device::CudaDriver& d = device::cuda_driver();
  check_driver(d, d.graph_launch(exec_, stream_), "cuGraphLaunch");
}

void StepGraph::sync() const {
  const device::CudaDriver& d = device::cuda_driver();
  check_driver(d, d.stream_synchronize(stream_), "cuStreamSynchronize");
}

}  // namespace moe::ep
