# Third-party dependencies, linked so that binaries run on a machine that has none of them:
# static yaml-cpp, header-only fmt and spdlog, header-only Boost.DLL on std::filesystem.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(Boost 1.74 REQUIRED)

# spdlog header-only on top of header-only fmt (Debian's spdlog_header_only target would pull
# the shared libfmt).
add_library(moe_dep_spdlog INTERFACE)
get_target_property(_spdlog_inc spdlog::spdlog_header_only INTERFACE_INCLUDE_DIRECTORIES)
target_include_directories(moe_dep_spdlog SYSTEM INTERFACE ${_spdlog_inc})
target_compile_definitions(moe_dep_spdlog INTERFACE SPDLOG_FMT_EXTERNAL)
target_link_libraries(moe_dep_spdlog INTERFACE fmt::fmt-header-only Threads::Threads)

# yaml-cpp from its static archive.
# (An INTERFACE target over the archive's path, so the installed package can carry it.)
find_library(MOE_YAML_CPP_STATIC NAMES libyaml-cpp.a REQUIRED)
get_target_property(_yaml_inc yaml-cpp INTERFACE_INCLUDE_DIRECTORIES)
add_library(moe_dep_yaml INTERFACE)
target_link_libraries(moe_dep_yaml INTERFACE ${MOE_YAML_CPP_STATIC})
if(_yaml_inc)
  target_include_directories(moe_dep_yaml SYSTEM INTERFACE ${_yaml_inc})
endif()

# Boost.DLL, header-only, on std::filesystem instead of Boost.Filesystem.
add_library(moe_dep_boost_dll INTERFACE)
target_link_libraries(moe_dep_boost_dll INTERFACE Boost::headers ${CMAKE_DL_LIBS})
target_compile_definitions(moe_dep_boost_dll INTERFACE BOOST_DLL_USE_STD_FS)

# CUTLASS/CuTe headers from the pinned PyPI wheel nvidia-cutlass (scripts/setup.sh installs it).
include(cmake/FindCutlassHeaders.cmake)
