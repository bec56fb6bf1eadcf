# The third-party targets moe_registry's libraries link, made from the dependencies' own imported
# targets: moe_registry_deps::spdlog (header-only, on header-only fmt), ::yaml_cpp (its static
# archive) and ::boost_dll (header-only, on std::filesystem). The build includes this file after
# find_package of each dependency, and so does the installed package (moe_registryConfig.cmake)
# after find_dependency, so the exported targets name these targets, never a path on the machine
# that built them: the package works from any prefix, on any machine with the dependencies.

# spdlog header-only on top of header-only fmt (Debian's spdlog_header_only target would pull
# the shared libfmt).
if(NOT TARGET moe_registry_deps::spdlog)
  get_target_property(_moe_spdlog_inc spdlog::spdlog_header_only INTERFACE_INCLUDE_DIRECTORIES)
  add_library(moe_registry_deps::spdlog INTERFACE IMPORTED)
  set_target_properties(moe_registry_deps::spdlog PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_moe_spdlog_inc}"
    INTERFACE_COMPILE_DEFINITIONS SPDLOG_FMT_EXTERNAL
    INTERFACE_LINK_LIBRARIES "fmt::fmt-header-only;Threads::Threads")
endif()

# yaml-cpp from its static archive, so binaries run where libyaml-cpp.so is absent. The archive is
# looked for beside the library the yaml-cpp package names (0.8 calls its target yaml-cpp::yaml-cpp);
# without one, the package's own target.
if(NOT TARGET moe_registry_deps::yaml_cpp)
  if(TARGET yaml-cpp::yaml-cpp)
    set(_moe_yaml yaml-cpp::yaml-cpp)
  else()
    set(_moe_yaml yaml-cpp)
  endif()
  get_target_property(_moe_yaml_lib ${_moe_yaml} LOCATION)
  get_filename_component(_moe_yaml_libdir "${_moe_yaml_lib}" DIRECTORY)
  find_library(MOE_YAML_CPP_STATIC NAMES libyaml-cpp.a HINTS "${_moe_yaml_libdir}")
  if(MOE_YAML_CPP_STATIC)
    add_library(moe_registry_deps::yaml_cpp STATIC IMPORTED)
    set_target_properties(moe_registry_deps::yaml_cpp PROPERTIES
      IMPORTED_LOCATION "${MOE_YAML_CPP_STATIC}"
      INTERFACE_INCLUDE_DIRECTORIES "$<TARGET_PROPERTY:${_moe_yaml},INTERFACE_INCLUDE_DIRECTORIES>")
  else()
    message(STATUS "moe: no static libyaml-cpp.a beside ${_moe_yaml_lib}: linking yaml-cpp shared")
    add_library(moe_registry_deps::yaml_cpp INTERFACE IMPORTED)
    set_target_properties(moe_registry_deps::yaml_cpp PROPERTIES
      INTERFACE_LINK_LIBRARIES ${_moe_yaml})
  endif()
endif()

# Boost.DLL, header-only, on std::filesystem instead of Boost.Filesystem.
if(NOT TARGET moe_registry_deps::boost_dll)
  add_library(moe_registry_deps::boost_dll INTERFACE IMPORTED)
  set_target_properties(moe_registry_deps::boost_dll PROPERTIES
    INTERFACE_COMPILE_DEFINITIONS BOOST_DLL_USE_STD_FS
    INTERFACE_LINK_LIBRARIES "Boost::headers;${CMAKE_DL_LIBS}")
endif()
