# ksearch_warnings(TARGET): strict warnings on ksearch's own targets only.
function(ksearch_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                                           -Wnon-virtual-dtor -Wno-missing-field-initializers
                                           # GCC 12 reports these falsely inside simdjson, Boost and libstdc++ when
                                           # they are inlined into our code at -O2.
                                           -Wno-maybe-uninitialized -Wno-restrict)
  if(KSEARCH_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
