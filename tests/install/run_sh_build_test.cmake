# A build of exactly the targets scripts/run.sh builds has the CLI and both
# helpers it starts, and the CLI finds them. The build plan is read from the
# build system as a fresh build would run it (make -n -B: every target out of
# date, nothing executed; ninja -t commands), so the test needs no second
# build tree.
#   cmake -DSOURCE_DIR=… -DBUILD_DIR=… -DGENERATOR=… -DCLI=… -P run_sh_build_test.cmake
file(READ ${SOURCE_DIR}/scripts/run.sh script)
string(REGEX MATCH "cmake --build [^\n]*--target ([A-Za-z0-9_ ]+)" line "${script}")
if(NOT line)
  message(FATAL_ERROR "scripts/run.sh has no 'cmake --build … --target …' line")
endif()
separate_arguments(targets UNIX_COMMAND "${CMAKE_MATCH_1}")
message(STATUS "run.sh builds: ${targets}")

if(GENERATOR MATCHES "Ninja")
  execute_process(COMMAND ninja -C ${BUILD_DIR} -t commands ${targets}
                  OUTPUT_VARIABLE plan RESULT_VARIABLE failed)
  set(links "-o tools/ksearch/ksearch " "-o tools/worker/ksearch-worker " "-o tools/compile/ksearch-compile ")
else()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${targets} -- -n -B
                  OUTPUT_VARIABLE plan RESULT_VARIABLE failed)
  set(links "Linking CXX executable ksearch\"" "Linking CXX executable ksearch-worker\""
            "Linking CXX executable ksearch-compile\"")
endif()
if(failed)
  message(FATAL_ERROR "the build plan of ${targets} could not be read")
endif()
foreach(link IN LISTS links)
  string(FIND "${plan}" "${link}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "a fresh build of run.sh's targets (${targets}) does not link: ${link}")
  endif()
endforeach()

# The CLI finds the helpers it starts (ksearch --version says where).
execute_process(COMMAND ${CLI} --version OUTPUT_VARIABLE version RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "ksearch --version failed: ${version}")
endif()
foreach(helper "worker: /[^\n]*/ksearch-worker\n" "compile helper: /[^\n]*/ksearch-compile")
  if(NOT version MATCHES "${helper}")
    message(FATAL_ERROR "ksearch --version does not find ${helper}:\n${version}")
  endif()
endforeach()
message(STATUS "the CLI finds both helpers:\n${version}")
