# cmake --install: headers, the SDK and core libraries, the tool, the plugins, the conformance
# problem set, the docs, and a CMake package that works from any prefix, so that a third party
# writes find_package(moe_registry) and links moe_registry::sdk.
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
# The third-party targets they link (moe_registry_deps::*) are not exported: the package's config
# makes them again from the dependencies found where it is used (MoeDependencyTargets.cmake).
install(TARGETS moe_abi moe_sdk moe_core
  EXPORT moe_registry_targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT moe_registry_targets NAMESPACE moe_registry::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moe_registry)
install(FILES cmake/MoePlugin.cmake cmake/MoeDependencyTargets.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moe_registry)

set(MOE_INSTALL_SCANNER_DIR ${CMAKE_INSTALL_LIBEXECDIR}/moe_registry)  # core/scanner
configure_package_config_file(cmake/moe_registryConfig.cmake.in
  ${PROJECT_BINARY_DIR}/moe_registryConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moe_registry
  PATH_VARS MOE_INSTALL_PLUGIN_DIR MOE_INSTALL_PROBLEM_DIR MOE_INSTALL_SCANNER_DIR)
# 0.x: a minor release may change the SDK a plugin builds against (its optional hooks are found
# by concepts, so an older install would build silently without them): the minor must match.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/moe_registryConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/moe_registryConfig.cmake
  ${PROJECT_BINARY_DIR}/moe_registryConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/moe_registry)

# The plugin author's kit: the conformance problem set, which the installed `moe conformance`
# reads by default (<exe>/../share/moe_registry/problems), the guide, the licence and notices.
install(DIRECTORY configs/problems/ DESTINATION ${MOE_INSTALL_PROBLEM_DIR}
  FILES_MATCHING PATTERN "*.yaml")
install(FILES LICENSE THIRD_PARTY_NOTICES CHANGELOG.md docs/plugin_guide.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR})
