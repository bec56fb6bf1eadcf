# moe_add_plugin(<name> SOURCES ... [LIBS ...]): a backend plugin as a MODULE library
# build/plugins/libmoe_<name>.so exporting only moe_plugin_get_api.
function(moe_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIR" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR ${MOE_OUTPUT_PLUGIN_DIR})
  endif()
  if(NOT ARG_OUTPUT_DIR)  # outside this project (an installed package): the current build dir
    set(ARG_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  set(target moe_plugin_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  # Only moe_plugin_get_api is exported (docs/design.md §2 rule 1). Hidden visibility also keeps
  # the SDK's template statics (the function table, the backend object) private to this library:
  # with default visibility GCC makes them unique symbols that the loader merges across plugins.
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME moe_${name}
    LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_libraries(${target} PRIVATE moe_sdk ${ARG_LIBS})
  # A project that sets no build type would compile the plugin with no optimisation at all (CMake's
  # empty default), and conformance would time a debug-speed backend: it gets Release flags.
  get_property(_multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
  if(NOT CMAKE_BUILD_TYPE AND NOT _multi_config)
    foreach(lang C CXX CUDA)
      separate_arguments(_flags UNIX_COMMAND "${CMAKE_${lang}_FLAGS_RELEASE}")
      if(_flags)
        target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:${lang}>:${_flags}>")
      endif()
    endforeach()
    message(STATUS "moe_add_plugin(${name}): no CMAKE_BUILD_TYPE, so Release flags "
                   "(${CMAKE_CXX_FLAGS_RELEASE})")
  endif()
  # Switches on ABI enums list every case (docs/design.md §2): a value added to the ABI then shows
  # up at compile time. In-tree plugins treat it as an error.
  if(MOE_STRICT_ENUM_SWITCH)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror=switch-enum>)
  else()
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wswitch-enum>)
  endif()
  # Static archives stay private to the plugin; a missing symbol fails the link, not the load.
  target_link_options(${target} PRIVATE -Wl,--exclude-libs,ALL -Wl,--no-undefined)
  if(ARG_OUTPUT_DIR STREQUAL MOE_OUTPUT_PLUGIN_DIR)
    set_property(GLOBAL APPEND PROPERTY MOE_PLUGIN_TARGETS ${target})
  endif()
endfunction()
