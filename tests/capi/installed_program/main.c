/* Lists the plugins the installed libmoe_core finds by default (the install's plugin directory,
 * through the install's plugin scanner), and selects a backend for a small problem. */
#include <stdio.h>
#include <string.h>

#include "moe/host/moe_host.h"

static int fail(const char* what, moe_status s) {
  fprintf(stderr, "%s: %s: %s\n", what, moe_host_status_name(s), moe_host_last_error());
  return 1;
}

int main(void) {
  moe_host_registry* registry = NULL;
  moe_status s = moe_host_registry_open(NULL, &registry);
  if (s != MOE_STATUS_OK) return fail("moe_host_registry_open", s);
  int64_t count = 0;
  s = moe_host_registry_plugin_count(registry, &count);
  if (s != MOE_STATUS_OK) return fail("moe_host_registry_plugin_count", s);
  for (int64_t i = 0; i < count; ++i) {
    moe_host_plugin_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    s = moe_host_registry_plugin_info(registry, i, &info);
    if (s != MOE_STATUS_OK) return fail("moe_host_registry_plugin_info", s);
    printf("%s %s\n", info.name, info.path);
  }
  moe_host_select_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.config_text =
      "backend: reference\nproblem: {experts: 4, top_k: 2, hidden: 64, "
      "intermediate: 32}\n";
  moe_host_selection* selection = NULL;
  s = moe_host_select(registry, &args, &selection);
  if (s != MOE_STATUS_OK) return fail("moe_host_select", s);
  moe_host_selection_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  s = moe_host_selection_info_get(selection, &info);
  if (s != MOE_STATUS_OK) return fail("moe_host_selection_info_get", s);
  printf("selected: %s\n", info.backend);
  moe_host_selection_destroy(selection);
  moe_host_registry_destroy(registry);
  return 0;
}
