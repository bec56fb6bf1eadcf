// Lists the plugins of one directory through the installed host API: proof that a program can
// link moe_registry::core from the package alone.
#include <iostream>

#include "moe/registry.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: list_plugins PLUGIN_DIR\n";
    return 2;
  }
  moe::DiscoveryOptions o;
  o.config_dirs = {argv[1]};
  o.use_env = false;
  o.use_default = false;
  const moe::Registry registry = moe::Registry::discover(o);
  for (const auto& p : registry.plugins()) std::cout << p->name() << "\n";
  return 0;
}
