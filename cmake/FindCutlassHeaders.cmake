# Finds the CUTLASS/CuTe headers shipped in the PyPI package nvidia-cutlass
# (cutlass_library/source/include): asks the project's Python (cmake/Python.cmake: the .venv's),
# then looks in the venv's site-packages directly. Sets MOE_CUTLASS_INCLUDE_DIR and the target
# moe_dep_cutlass.
set(MOE_CUTLASS_INCLUDE_DIR "" CACHE PATH "CUTLASS include directory (found from nvidia-cutlass)")
# A cached directory that has lost its headers (a removed venv or package) is looked for again.
if(NOT EXISTS "${MOE_CUTLASS_INCLUDE_DIR}/cute/tensor.hpp")
  set(_cutlass_inc "")
  if(Python3_Interpreter_FOUND)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c
              "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))"
      OUTPUT_VARIABLE _cutlass_inc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      set(_cutlass_inc "")
    endif()
  endif()
  if(NOT EXISTS "${_cutlass_inc}/cute/tensor.hpp" AND MOE_VENV_DIR)
    file(GLOB _cutlass_inc
         "${MOE_VENV_DIR}/lib/python3*/site-packages/cutlass_library/source/include")
    if(_cutlass_inc)
      list(GET _cutlass_inc 0 _cutlass_inc)
    endif()
  endif()
  if(EXISTS "${_cutlass_inc}/cute/tensor.hpp")
    set(MOE_CUTLASS_INCLUDE_DIR "${_cutlass_inc}" CACHE PATH "CUTLASS include directory" FORCE)
  endif()
endif()
if(EXISTS "${MOE_CUTLASS_INCLUDE_DIR}/cute/tensor.hpp")
  add_library(moe_dep_cutlass INTERFACE)
  target_include_directories(moe_dep_cutlass SYSTEM INTERFACE ${MOE_CUTLASS_INCLUDE_DIR})
  set(MOE_HAVE_CUTLASS ON)
  message(STATUS "moe: CUTLASS headers at ${MOE_CUTLASS_INCLUDE_DIR}")
else()
  set(MOE_HAVE_CUTLASS OFF)
  message(STATUS "moe: CUTLASS headers not found (scripts/setup.sh installs nvidia-cutlass==4.2.0.0 "
                 "into .venv)")
endif()
