# The ko half of a compile-fail test (see fusedsl_add_failtest): `cmake -DFAILTEST_PARAMS=<file> -P`
# this script. It builds FAILTEST_TARGET in FAILTEST_BUILD_DIR and passes when the build fails, the
# output matches FAILTEST_REGEX and each of FAILTEST_ALSO, and it holds at most FAILTEST_MAX_ERRORS
# "error:" lines.
include(${FAILTEST_PARAMS})

execute_process(
  COMMAND ${CMAKE_COMMAND} --build ${FAILTEST_BUILD_DIR} --target ${FAILTEST_TARGET}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)

if(rc EQUAL 0)
  message(FATAL_ERROR "failtest: ${FAILTEST_TARGET} compiled, but the mistake under FUSEDSL_FAILTEST "
                      "must be rejected at compile time.\n${out}")
endif()
if(NOT out MATCHES "${FAILTEST_REGEX}")
  message(FATAL_ERROR "failtest: ${FAILTEST_TARGET} failed to compile, but the output does not match "
                      "the expected message\n  ${FAILTEST_REGEX}\n${out}")
endif()
foreach(r IN LISTS FAILTEST_ALSO)
  if(NOT out MATCHES "${r}")
    message(FATAL_ERROR "failtest: ${FAILTEST_TARGET}: the output does not match\n  ${r}\n${out}")
  endif()
endforeach()
# Compiler errors only: make's "*** Error 1" and ninja's "FAILED:" lines do not match.
string(REPLACE ";" "," flat "${out}")  # a list separator inside a message must not split it
string(REGEX MATCHALL "[^\n]*error:[^\n]*" errors "${flat}")
list(LENGTH errors n_errors)
if(n_errors GREATER FAILTEST_MAX_ERRORS)
  message(FATAL_ERROR "failtest: ${FAILTEST_TARGET} gives ${n_errors} errors, at most "
                      "${FAILTEST_MAX_ERRORS} expected (a cascade, not one clear message).\n${out}")
endif()
message(STATUS "failtest: ${FAILTEST_TARGET} rejected with ${n_errors} error(s), as expected")
