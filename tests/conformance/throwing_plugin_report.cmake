# cmake -DMOE=<moe> -DPLUGIN=<throwing plugin .so> -DREPORT=<file.json> -P throwing_plugin_report.cmake
# Runs `moe conformance` on a plugin whose run() throws: it must exit with 3 (a mismatch) and
# still write a report in which those cases are errors with rel_err null.
file(REMOVE "${REPORT}")
execute_process(COMMAND "${MOE}" conformance --plugin "${PLUGIN}" --filter fixture_throws/bf16_softmax_silu
                        --report "${REPORT}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 3)
  message(FATAL_ERROR "exit code ${rc}, expected 3:\n${out}")
endif()
if(NOT out MATCHES "pass 0  fail [1-9][0-9]* \\(0 wrong, [1-9][0-9]* error\\)")
  message(FATAL_ERROR "no error count in the summary:\n${out}")
endif()
file(READ "${REPORT}" json)
string(JSON first GET "${json}" cases 0)
foreach(key status stage detail)
  string(JSON ${key} GET "${first}" ${key})
endforeach()
string(JSON rel_err TYPE "${first}" rel_err)
string(JSON errors GET "${json}" summary error)
if(NOT status STREQUAL "error" OR NOT stage STREQUAL "run" OR NOT rel_err STREQUAL "NULL"
   OR NOT detail MATCHES "deliberate" OR errors LESS 1)
  message(FATAL_ERROR "unexpected first case: ${first}\nsummary errors: ${errors}")
endif()
