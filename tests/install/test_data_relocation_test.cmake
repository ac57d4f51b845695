# Test binaries find their data through $KSEARCH_TEST_SOURCE_DIR, as a GPU
# bundle's tests do on a host where the repository sits at another path: a
# CPU test that loads tests/eval/data/tma_tile passes with the variable
# naming a copy of that data elsewhere, and fails with it naming a tree
# without the data (so the build machine's path was not read).
#   cmake -DSOURCE_DIR=… -DWORK_DIR=… -DTEST_BINARY=… -P test_data_relocation_test.cmake
set(filter --gtest_filter=CompileOnlyEvaluator.ChecksTensorMapArgumentsAgainstTheKernel)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/moved/tests/eval/data ${WORK_DIR}/empty)
file(COPY ${SOURCE_DIR}/tests/eval/data/tma_tile DESTINATION ${WORK_DIR}/moved/tests/eval/data)

execute_process(COMMAND ${CMAKE_COMMAND} -E env KSEARCH_TEST_SOURCE_DIR=${WORK_DIR}/moved
                        ${TEST_BINARY} ${filter}
                OUTPUT_VARIABLE moved RESULT_VARIABLE moved_failed ERROR_VARIABLE moved_err)
if(moved_failed OR NOT moved MATCHES "1 test")
  message(FATAL_ERROR "with the data moved, the test failed:\n${moved}${moved_err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env KSEARCH_TEST_SOURCE_DIR=${WORK_DIR}/empty
                        ${TEST_BINARY} ${filter}
                OUTPUT_VARIABLE empty RESULT_VARIABLE empty_failed ERROR_VARIABLE empty_err)
if(NOT empty_failed OR NOT empty MATCHES "${WORK_DIR}/empty/tests/eval/data/tma_tile")
  message(FATAL_ERROR "with KSEARCH_TEST_SOURCE_DIR naming a tree without the data, the test did "
                      "not fail naming it:\n${empty}${empty_err}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
