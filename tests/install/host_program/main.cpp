// Lists the plugins of one directory through the installed host API, and the pinned oracle:
// proof that a program can link moe_registry::core from the package alone, wherever the prefix
// was moved (the package says where its plugins and scanner are).
#include <iostream>

#include "moe/registry.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: list_plugins PLUGIN_DIR\n";
    return 2;
  }
  moe::DiscoveryOptions o;
  o.config_dirs = {MOE_REGISTRY_PLUGIN_DIR, argv[1]};
  o.core_plugin_dir = MOE_REGISTRY_PLUGIN_DIR;
  o.scanner = MOE_REGISTRY_SCANNER;
  o.scan = moe::DiscoveryOptions::Scan::kRequired;
  o.use_env = false;
  o.use_default = false;
  const moe::Registry registry = moe::Registry::discover(o);
  for (const auto& p : registry.plugins()) std::cout << p->name() << "\n";
  std::cout << "oracle: " << registry.oracle()->path().string() << "\n";
  return 0;
}
