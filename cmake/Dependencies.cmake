# Third-party dependencies, linked so that binaries run on a machine that has none of them:
# static yaml-cpp, header-only fmt and spdlog, header-only Boost.DLL on std::filesystem.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(Boost 1.74 REQUIRED)

# The targets the libraries link (moe_registry_deps::*), made the same way here and in the
# installed package; the moe_dep_* names are what the project's CMakeLists link.
include(cmake/MoeDependencyTargets.cmake)
add_library(moe_dep_spdlog ALIAS moe_registry_deps::spdlog)
add_library(moe_dep_yaml ALIAS moe_registry_deps::yaml_cpp)
add_library(moe_dep_boost_dll ALIAS moe_registry_deps::boost_dll)

# The project's Python tools run from its virtual environment (.venv, made by scripts/setup.sh).
include(cmake/Python.cmake)
# CUTLASS/CuTe headers from the pinned PyPI wheel nvidia-cutlass (scripts/setup.sh installs it).
include(cmake/FindCutlassHeaders.cmake)
