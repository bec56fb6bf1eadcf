# The project's Python tools (the fixture generators that tests run, the CUTLASS header lookup) use
# the virtual environment scripts/setup.sh makes in .venv: a stock Debian 12+ or Ubuntu 24.04
# Python refuses pip installs into itself (PEP 668, "externally managed"). Every
# find_package(Python3) after this one gets the venv's interpreter. -DMOE_VENV_DIR= (empty) leaves
# the choice to FindPython3 (and -DPython3_EXECUTABLE).
set(MOE_VENV_DIR "${PROJECT_SOURCE_DIR}/.venv" CACHE PATH
    "Virtual environment of the project's Python tools (scripts/setup.sh makes it)")
if(MOE_VENV_DIR AND EXISTS "${MOE_VENV_DIR}/bin/python3")
  # FORCE: a build directory configured before the venv existed has the system Python cached.
  set(Python3_EXECUTABLE "${MOE_VENV_DIR}/bin/python3" CACHE FILEPATH
      "Python of the project's tools (from MOE_VENV_DIR)" FORCE)
elseif(MOE_VENV_DIR)
  message(STATUS "moe: no virtual environment at ${MOE_VENV_DIR} (scripts/setup.sh makes it); "
                 "Python tools use the python3 FindPython3 finds")
endif()
find_package(Python3 COMPONENTS Interpreter)
