// moe_host_select: a config (file or text) to the chosen backend and why (docs/design.md §2
// rule 6), with the config's problem and options kept for moe_host_layer_prepare.
#include "handles.hpp"

using namespace moe::capi;  // NOLINT: the C entry points below are thin

extern "C" {

moe_status moe_host_select(const moe_host_registry* registry, const moe_host_select_args* args,
                           moe_host_selection** selection) {
  return guarded([&] {
    deref(selection, "selection") = nullptr;
    const auto& r = deref(registry, "registry");
    const moe_host_select_args a =
        read_args(args, MOE_HOST_SELECT_ARGS_MIN_SIZE, "moe_host_select_args");
    MOE_CHECK((a.config_path == nullptr) != (a.config_text == nullptr), MOE_STATUS_INVALID_ARGUMENT,
              "moe_host_select_args: set exactly one of config_path and config_text (both are {})",
              a.config_path == nullptr ? "NULL" : "set");
    auto s = std::make_unique<moe_host_selection>();
    s->config = a.config_path ? moe::Config::load_file(a.config_path)
                              : moe::Config::parse(a.config_text, "<config_text>");
    s->selection = moe::select_backend(r.registry, s->config,
                                       a.ask_every ? moe::Ask::kEvery : moe::Ask::kNeeded);
    s->backend = s->selection.plugin->name();
    s->explanation = s->selection.explain();
    s->problem = s->config.problem.c();
    for (const auto& [key, value] : s->selection.options)
      s->options.push_back(moe_option{key.c_str(), value.c_str()});
    *selection = s.release();
  });
}

moe_status moe_host_selection_destroy(moe_host_selection* selection) {
  return guarded([&] { delete selection; });
}

moe_status moe_host_selection_info_get(const moe_host_selection* selection,
                                       moe_host_selection_info* info) {
  return guarded([&] {
    const auto& s = deref(selection, "selection");
    moe_host_selection_info out{};
    out.backend = s.backend.c_str();
    out.rule = s.selection.rule.c_str();
    out.explanation = s.explanation.c_str();
    out.problem = &s.problem;
    out.options = s.options.empty() ? nullptr : s.options.data();
    out.num_options = int64_t(s.options.size());
    out.tokens = s.config.tokens;
    out.seed = s.config.seed;
    write_out(info, MOE_HOST_SELECTION_INFO_MIN_SIZE, "moe_host_selection_info", out);
  });
}

}  // extern "C"
