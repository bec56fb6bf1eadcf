# Finds the CUTLASS/CuTe headers shipped in the PyPI package nvidia-cutlass
# (cutlass_library/source/include). Sets MOE_CUTLASS_INCLUDE_DIR and the target moe_dep_cutlass.
set(MOE_CUTLASS_INCLUDE_DIR "" CACHE PATH "CUTLASS include directory (found from nvidia-cutlass)")
if(NOT MOE_CUTLASS_INCLUDE_DIR)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c
              "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))"
      OUTPUT_VARIABLE _cutlass_inc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
    if(_rc EQUAL 0 AND EXISTS "${_cutlass_inc}/cutlass/cutlass.h")
      set(MOE_CUTLASS_INCLUDE_DIR "${_cutlass_inc}" CACHE PATH "CUTLASS include directory" FORCE)
    endif()
  endif()
endif()
if(MOE_CUTLASS_INCLUDE_DIR AND EXISTS "${MOE_CUTLASS_INCLUDE_DIR}/cute/tensor.hpp")
  add_library(moe_dep_cutlass INTERFACE)
  target_include_directories(moe_dep_cutlass SYSTEM INTERFACE ${MOE_CUTLASS_INCLUDE_DIR})
  set(MOE_HAVE_CUTLASS ON)
  message(STATUS "moe: CUTLASS headers at ${MOE_CUTLASS_INCLUDE_DIR}")
else()
  set(MOE_HAVE_CUTLASS OFF)
  message(STATUS "moe: CUTLASS headers not found (pip install nvidia-cutlass==4.2.0.0)")
endif()
