// How `moe bench` measured a point, for its report and records: what was timed, on which device,
// and whether the floor's ceilings (measured on one H200, cmd_bench.cpp) apply there.
#pragma once

#include <optional>
#include <string>

#include "moe/plugin.hpp"

namespace moe::tool {

// What was timed. Only a plugin with its own benchmark() (ABI 1.1) times runs with device events
// and can replay them as CUDA graphs; any other is timed on the host clock around run() + sync,
// and never in a graph (a host-memory plugin has no device work to capture).
enum class Timing { kGraph, kStream, kHost };
const char* timing_column(Timing t);  // the text report: "graph", "stream", "host"
const char* timing_record(Timing t);  // the records: "cuda_graph", "device_events", "host_clock"

// The GPU a device-memory plugin runs on, as the NVIDIA driver names it: the device of the CUDA
// context current on this thread (the plugin's, once it has prepared a layer), else device 0.
// nullopt for a host-memory plugin, or without a driver. The driver (libcuda.so.1) is loaded at
// run time, so the tool needs no CUDA to build or start.
std::optional<std::string> device_of(const Plugin& plugin);

// The NVIDIA driver (libcuda.so.1, loaded at run time, never closed, initialised) and the calling
// thread's current CUDA device, else device 0; nullopt where there is no driver or it fails.
struct DriverDevice {
  void* library;
  int device;
};
std::optional<DriverDevice> current_driver_device();

// The ceilings hold for a device-memory plugin on an H200; anywhere else (another GPU, the host)
// the floor is the H200's, nominal. `record`: the device's name where they hold, else
// "nominal H200"; `why`: the same in words, for the text report.
struct Ceilings {
  std::string record, why;
};
Ceilings ceilings_for(const Plugin& plugin, const std::optional<std::string>& gpu);

}  // namespace moe::tool
