# safetensors files from the real Python writer (tests/fixtures/make_safetensors.py), written by
# a ctest fixture before the tests that read them. The reader's tests get their own binary so
# that only they wait for (and require) the fixture.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
set(MOE_SAFETENSORS_FIXTURE_DIR ${PROJECT_BINARY_DIR}/fixtures/safetensors)

add_test(NAME safetensors_fixtures
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/fixtures/make_safetensors.py
          ${MOE_SAFETENSORS_FIXTURE_DIR})
set_tests_properties(safetensors_fixtures PROPERTIES FIXTURES_SETUP safetensors_files)

add_executable(moe_safetensors_tests safetensors_test.cpp)
target_link_libraries(moe_safetensors_tests PRIVATE
  moe_core GTest::gtest GTest::gmock GTest::gtest_main)
target_compile_options(moe_safetensors_tests PRIVATE -Wall -Wextra)
target_compile_definitions(moe_safetensors_tests PRIVATE
  MOE_SAFETENSORS_FIXTURE_DIR="${MOE_SAFETENSORS_FIXTURE_DIR}")
gtest_discover_tests(moe_safetensors_tests WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                     DISCOVERY_TIMEOUT 60
                     PROPERTIES FIXTURES_REQUIRED safetensors_files)
