// moe_registry._core: the host C API (moe/host/moe_host.h) for Python. Thin: each class owns one
// C handle; the Python package (python/moe_registry) builds the public API on it.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "handles.hpp"
#include "status.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using moe::py::EpDeviceStep;
using moe::py::EpGroup;
using moe::py::Layer;
using moe::py::Problem;
using moe::py::Registry;
using moe::py::Selection;

namespace {

// StatusError -> moe_registry.MoeError(status name, message), the package's exception type.
void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const moe::py::StatusError& e) {
    const nb::object error = nb::module_::import_("moe_registry._errors").attr("MoeError");
    PyErr_SetObject(error.ptr(), nb::make_tuple(moe_host_status_name(e.status()), e.what()).ptr());
  }
}

nb::tuple version() {
  uint32_t host_major = 0, host_minor = 0, abi_major = 0, abi_minor = 0;
  moe::py::check(moe_host_version(&host_major, &host_minor, &abi_major, &abi_minor));
  return nb::make_tuple(nb::make_tuple(host_major, host_minor),
                        nb::make_tuple(abi_major, abi_minor));
}

}  // namespace

NB_MODULE(_core, m) {
  nb::register_exception_translator(&translate);
  m.def("version", &version, "((host major, minor), (plugin ABI major, minor)) of libmoe_core");

  nb::class_<Problem>(m, "Problem")
      .def_static("parse", &Problem::parse, "text"_a)
      .def("to_json", &Problem::to_json);

  nb::class_<Selection>(m, "Selection")
      .def_prop_ro("backend", [](const Selection& s) { return std::string(s.info().backend); })
      .def_prop_ro("rule", [](const Selection& s) { return std::string(s.info().rule); })
      .def_prop_ro("explanation",
                   [](const Selection& s) { return std::string(s.info().explanation); })
      .def_prop_ro("problem", [](const Selection& s) { return Problem::copy(*s.info().problem); })
      .def_prop_ro("options", &Selection::options)
      .def_prop_ro("tokens", [](const Selection& s) { return s.info().tokens; })
      .def_prop_ro("seed", [](const Selection& s) { return s.info().seed; });

  nb::class_<Layer>(m, "Layer")
      .def_prop_ro("backend", [](const Layer& l) { return std::string(l.info().backend); })
      .def_prop_ro("router", [](const Layer& l) { return std::string(l.info().router); })
      .def_prop_ro("problem", [](const Layer& l) { return Problem::copy(*l.info().problem); })
      .def_prop_ro("memory",
                   [](const Layer& l) {
                     return l.info().memory == MOE_MEMORY_HOST ? "host" : "cuda_device";
                   })
      .def_rw("device_id", &Layer::device_id)
      .def("workspace_size", &Layer::workspace_size, "tokens"_a)
      .def("route_workspace_size", &Layer::route_workspace_size, "tokens"_a)
      .def_prop_ro("real_experts", [](const Layer& l) { return l.info().real_experts; })
      .def_prop_ro("router_dtype",
                   [](const Layer& l) { return std::string(l.info().router_dtype); })
      .def_prop_ro("weights_from",
                   [](const Layer& l) { return std::string(l.info().weights_from); })
      .def("router_tensors", &Layer::router_tensors)
      .def("route", &Layer::route, "logits"_a, "topk_ids"_a, "topk_weights"_a, "bias"_a.none(),
           "is_padding"_a.none(), "workspace"_a.none(), "stream"_a, "stream_is_current"_a = false)
      .def("run", &Layer::run, "hidden"_a, "topk_ids"_a, "topk_weights"_a, "out"_a,
           "workspace"_a.none(), "stream"_a, "router_logits"_a.none(), "bias"_a.none(),
           "is_padding"_a.none(), "stream_is_current"_a = false);

  nb::class_<EpGroup>(m, "EpGroup")
      .def(nb::init<uintptr_t, const Layer&, double>(), "nccl_comm"_a, "layer"_a, "timeout_s"_a)
      .def(nb::init<>(), "a single rank, without NCCL")
      .def_prop_ro("rank", &EpGroup::rank)
      .def_prop_ro("world", &EpGroup::world)
      .def("step", &EpGroup::step, "layer"_a, "hidden"_a, "topk_ids"_a, "topk_weights"_a, "out"_a)
      .def("close", &EpGroup::close);
  nb::class_<EpDeviceStep>(m, "EpDeviceStep")
      .def(nb::init<EpGroup&, const Layer&, int64_t, bool, int64_t>(), "group"_a, "layer"_a,
           "max_tokens"_a, "ragged"_a, "chunks"_a, nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>())
      .def("run", &EpDeviceStep::run, "hidden"_a, "topk_ids"_a, "topk_weights"_a, "out"_a,
           "stream"_a, "stream_is_current"_a = false)
      .def("close", &EpDeviceStep::close);

  nb::class_<Registry>(m, "Registry")
      .def(nb::init<const std::vector<std::string>&, const std::vector<std::string>&, bool, bool,
                    const std::optional<std::string>&, const std::optional<std::string>&>(),
           "plugin_dirs"_a, "plugin_files"_a, "use_env"_a, "use_default"_a,
           "core_plugin_dir"_a.none(), "scanner"_a.none())
      .def("plugins", &Registry::plugins)
      .def("skipped", &Registry::skipped)
      .def("describe", &Registry::describe, "name"_a, "problem"_a.none())
      .def("supports", &Registry::supports, "name"_a, "problem"_a)
      .def("select", &Registry::select, "path"_a.none(), "text"_a.none(), "ask_every"_a)
      .def("prepare", &Registry::prepare, "backend"_a.none(), "problem"_a, "weights"_a, "options"_a,
           "stream"_a)
      .def("prepare_checkpoint", &Registry::prepare_checkpoint, "path"_a.none(), "text"_a.none(),
           "backend"_a.none(), "stream"_a)
      .def("conformance", &Registry::conformance, "plugin_path"_a, "problems"_a.none(),
           "report"_a.none(), "seed"_a, "gpu_sized"_a);
}
