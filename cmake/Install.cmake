# cmake --install: headers, the SDK and core libraries, the tool, the plugins, and a CMake
# package so that a third party writes find_package(moe_registry) and links moe_registry::sdk.
include(CMakePackageConfigHelpers)

# Headers by audience, in two include roots: a plugin author's (moe_registry::abi and ::sdk) holds
# only moe/abi and moe/sdk; the host API (moe_registry::core) adds moe/*.hpp.
install(DIRECTORY core/include/moe/abi core/include/moe/sdk
  DESTINATION ${MOE_INSTALL_PLUGIN_INCLUDEDIR}/moe)
install(FILES core/include/moe/moe_abi.h DESTINATION ${MOE_INSTALL_PLUGIN_INCLUDEDIR}/moe)
install(DIRECTORY core/include/moe/ DESTINATION ${MOE_INSTALL_HOST_INCLUDEDIR}/moe
  FILES_MATCHING PATTERN "*.hpp" PATTERN "abi" EXCLUDE PATTERN "sdk" EXCLUDE)
set_target_properties(moe_abi PROPERTIES EXPORT_NAME abi)
set_target_properties(moe_sdk PROPERTIES EXPORT_NAME sdk)
set_target_properties(moe_core PROPERTIES EXPORT_NAME core)
install(TARGETS moe_abi moe_sdk moe_core moe_dep_spdlog moe_dep_yaml moe_dep_boost_dll
  EXPORT moe_registry_targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT moe_registry_targets NAMESPACE moe_registry::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moe_registry)
install(FILES cmake/MoePlugin.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moe_registry)

configure_package_config_file(cmake/moe_registryConfig.cmake.in
  ${PROJECT_BINARY_DIR}/moe_registryConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moe_registry
  PATH_VARS MOE_INSTALL_PLUGIN_DIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/moe_registryConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/moe_registryConfig.cmake
  ${PROJECT_BINARY_DIR}/moe_registryConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moe_registry)
