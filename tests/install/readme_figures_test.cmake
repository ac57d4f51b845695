# README.md's "Latest measured figures" table is the newest one-run table of
# docs/PERFORMANCE.md (its first table): a refresh of one without the other
# fails here.
#   cmake -DSOURCE_DIR=… -P readme_figures_test.cmake
function(first_table text out)
  string(FIND "${text}" "\n| " start)
  if(start EQUAL -1)
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  math(EXPR start "${start} + 1")
  string(SUBSTRING "${text}" ${start} -1 rest)
  string(FIND "${rest}" "\n\n" end)
  string(SUBSTRING "${rest}" 0 ${end} table)
  set(${out} "${table}" PARENT_SCOPE)
endfunction()

file(READ ${SOURCE_DIR}/README.md readme)
file(READ ${SOURCE_DIR}/docs/PERFORMANCE.md performance)
string(FIND "${readme}" "## Latest measured figures" section)
if(section EQUAL -1)
  message(FATAL_ERROR "README.md has no '## Latest measured figures' section")
endif()
string(SUBSTRING "${readme}" ${section} -1 readme)
first_table("${readme}" readme_table)
first_table("${performance}" performance_table)
if(performance_table STREQUAL "")
  message(FATAL_ERROR "docs/PERFORMANCE.md has no table")
endif()
if(NOT readme_table STREQUAL performance_table)
  message(FATAL_ERROR "README.md's figures are not docs/PERFORMANCE.md's newest table.\n"
                      "README:\n${readme_table}\n\nPERFORMANCE.md:\n${performance_table}")
endif()
