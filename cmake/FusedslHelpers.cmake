# Helper functions for the project's own tests. Not installed.

# fusedsl_add_test(<name> <sources...> [LABELS l...] [LIBS lib...])
# One doctest executable, registered with CTest under <name>.
function(fusedsl_add_test name)
  cmake_parse_arguments(ARG "" "" "LABELS;LIBS" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE fusedsl_dev fusedsl_doctest_main ${ARG_LIBS})
  add_test(NAME ${name} COMMAND ${name})
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()

# fusedsl_add_failtest(<name> <source> <regex>)
# Eigen-style compile-fail test: <source> is compiled twice. Without FUSEDSL_FAILTEST it must build
# (test <name>_ok); with -DFUSEDSL_FAILTEST it must fail and the compiler output must match <regex>
# (test <name>_ko). Both targets are excluded from `all`; the tests build them through CMake.
function(fusedsl_add_failtest name source regex)
  foreach(kind ok ko)
    set(tgt failtest_${name}_${kind})
    add_library(${tgt} OBJECT EXCLUDE_FROM_ALL ${source})
    target_link_libraries(${tgt} PRIVATE fusedsl)
    target_compile_options(${tgt} PRIVATE -fmax-errors=3)
    if(kind STREQUAL "ko")
      target_compile_definitions(${tgt} PRIVATE FUSEDSL_FAILTEST)
    endif()
    add_test(NAME failtest.${name}.${kind}
             COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target ${tgt})
    set_tests_properties(failtest.${name}.${kind} PROPERTIES LABELS failtest)
  endforeach()
  set_tests_properties(failtest.${name}.ko PROPERTIES WILL_FAIL FALSE
                       PASS_REGULAR_EXPRESSION "${regex}")
endfunction()
