# Headers by audience: a plugin (plugins/, examples/) may include the C ABI (moe/abi/) and the
# plugin SDK (moe/sdk/), never a host header (moe/*.hpp: registry, config, checkpoints, ...).
# Run as: cmake -DROOT=<source dir> -P plugin_includes.cmake
file(GLOB_RECURSE sources
  ${ROOT}/plugins/*.cpp ${ROOT}/plugins/*.hpp ${ROOT}/plugins/*.h ${ROOT}/plugins/*.cu
  ${ROOT}/plugins/*.cuh ${ROOT}/examples/*.cpp ${ROOT}/examples/*.hpp)
set(offenders "")
foreach(f IN LISTS sources)
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]+[\"<]moe/")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "[\"<]moe/(abi|sdk)/")
      file(RELATIVE_PATH rel ${ROOT} ${f})
      string(STRIP "${line}" line)
      list(APPEND offenders "${rel}: ${line}")
    endif()
  endforeach()
endforeach()
list(LENGTH sources count)
if(count EQUAL 0)
  message(FATAL_ERROR "no plugin sources found under ${ROOT}/plugins")
endif()
if(offenders)
  list(JOIN offenders "\n  " text)
  message(FATAL_ERROR "plugins include host headers (only moe/abi/ and moe/sdk/ are theirs):\n  ${text}")
endif()
message(STATUS "${count} plugin sources include only moe/abi/ and moe/sdk/")
