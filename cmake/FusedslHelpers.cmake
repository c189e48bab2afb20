# Helper functions for the project's own tests. Not installed.

# fusedsl_add_test(<name> <sources...> [HEADER_ONLY] [LABELS l...] [LIBS lib...] [LAUNCHER cmd...])
# One doctest executable, registered with CTest under <name>; LAUNCHER: a command that runs it
# (the executable's path is its last argument). Built in the compiled mode (fusedsl_dev), or with
# HEADER_ONLY in header-only mode (fusedsl_dev_header_only; core/compiled_mode.hpp).
# The instruction sets of the compiler's default x86-64 target only (SSE2: no AVX, no FMA, no AMX),
# for test builds of the SSE2 path. -mno-... flags, not -march=x86-64: GCC honours an explicit
# -mno-ISA whatever its place, while fusedsl_dev's -march=native comes after a target's own options.
# FUSEDSL_HAVE_X86_64_FLAGS says whether the compiler takes them (tests/backend/cpu).
set(FUSEDSL_X86_64_BASELINE_FLAGS -mno-sse3 -mno-amx-tile -mno-amx-int8 -mno-amx-bf16)
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag("${FUSEDSL_X86_64_BASELINE_FLAGS}" FUSEDSL_HAVE_X86_64_FLAGS)

# Which builds of the CPU kernel tests (tests/backend/cpu/kernels) to make. "all": the native build, AVX2 with
# AVX-512 off, the x86-64 baseline (SSE2) and the forced scalar path. "widths": only the builds
# that differ in vector width on every x86-64 machine (native: 8 or 16 f32 lanes, SSE2: 4, scalar:
# 1), the width being what decides the loop tails a sanitizer checks; the AVX2 builds (the native
# width itself on an AVX2 machine) are left to the release suite. The debug-asan preset sets it.
set(FUSEDSL_KERNEL_TEST_BUILDS "all" CACHE STRING "Builds of the CPU kernel tests: all or widths")
set_property(CACHE FUSEDSL_KERNEL_TEST_BUILDS PROPERTY STRINGS all widths)
if(NOT FUSEDSL_KERNEL_TEST_BUILDS MATCHES "^(all|widths)$")
  message(FATAL_ERROR "FUSEDSL_KERNEL_TEST_BUILDS must be all or widths, not '${FUSEDSL_KERNEL_TEST_BUILDS}'")
endif()

function(fusedsl_add_test name)
  cmake_parse_arguments(ARG "HEADER_ONLY" "" "LABELS;LIBS;LAUNCHER" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  set(_mode fusedsl_dev)
  if(ARG_HEADER_ONLY)
    set(_mode fusedsl_dev_header_only)
  endif()
  target_link_libraries(${name} PRIVATE ${_mode} fusedsl_doctest_main ${ARG_LIBS})
  if(ARG_LAUNCHER)
    add_test(NAME ${name} COMMAND ${ARG_LAUNCHER} $<TARGET_FILE:${name}>)
  else()
    add_test(NAME ${name} COMMAND ${name})
  endif()
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()

# fusedsl_add_failtest(<name> <source> <regex> [ALSO <regex>...] [MAX_ERRORS n] [OPTIONS opt...])
# Compile-fail test in the manner of Eigen's failtest/: <source> holds a correct program, and the
# mistake under `#ifdef FUSEDSL_FAILTEST`. It is compiled twice, through the build system:
#   failtest.<name>.ok  without FUSEDSL_FAILTEST: the target must build (so a ko test cannot pass
#                       because the file is broken in some other way);
#   failtest.<name>.ko  with -DFUSEDSL_FAILTEST: the build must fail, the compiler output must match
#                       <regex> (and every ALSO regex, in any order), and it must hold at most MAX_ERRORS (default 1) "error:" lines, so a
#                       diagnostic that cascades into a page of errors fails the test.
# OPTIONS: compiler options for both builds (for a mistake that is a build setting).
# The ko check is cmake/FusedslFailtestCheck.cmake, run with `cmake -P`; the regex travels in a
# generated file so that brackets, quotes and semicolons in it need no escaping. Both targets are
# excluded from `all`.
set(_fusedsl_failtest_check ${CMAKE_CURRENT_LIST_DIR}/FusedslFailtestCheck.cmake)
function(fusedsl_add_failtest name source regex)
  cmake_parse_arguments(ARG "" "MAX_ERRORS" "ALSO;OPTIONS" ${ARGN})
  if(NOT DEFINED ARG_MAX_ERRORS)
    set(ARG_MAX_ERRORS 1)
  endif()
  get_filename_component(source ${source} ABSOLUTE)
  foreach(kind ok ko)
    set(tgt failtest_${name}_${kind})
    add_library(${tgt} OBJECT EXCLUDE_FROM_ALL ${source})
    target_link_libraries(${tgt} PRIVATE fusedsl_dev)
    # Bounded, so that a cascade is visible (and counted) but cannot flood the log.
    target_compile_options(${tgt} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-fmax-errors=10>
                                          $<$<CXX_COMPILER_ID:Clang>:-ferror-limit=10>
                                          ${ARG_OPTIONS})
    if(kind STREQUAL "ko")
      target_compile_definitions(${tgt} PRIVATE FUSEDSL_FAILTEST)
    endif()
  endforeach()

  add_test(NAME failtest.${name}.ok
           COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target failtest_${name}_ok)
  set(params ${CMAKE_CURRENT_BINARY_DIR}/failtest_${name}.cmake)
  set(also "")
  foreach(r IN LISTS ARG_ALSO)
    string(APPEND also "list(APPEND FAILTEST_ALSO [=[${r}]=])\n")
  endforeach()
  file(CONFIGURE OUTPUT ${params} CONTENT [==[
set(FAILTEST_BUILD_DIR [=[@CMAKE_BINARY_DIR@]=])
set(FAILTEST_TARGET [=[failtest_@name@_ko]=])
set(FAILTEST_REGEX [=[@regex@]=])
@also@
set(FAILTEST_MAX_ERRORS @ARG_MAX_ERRORS@)
]==] @ONLY)
  add_test(NAME failtest.${name}.ko
           COMMAND ${CMAKE_COMMAND} -DFAILTEST_PARAMS=${params} -P ${_fusedsl_failtest_check})
  set_tests_properties(failtest.${name}.ok failtest.${name}.ko PROPERTIES LABELS failtest TIMEOUT 300)
  # Ninja keeps one log and one deps file per build tree: never run two of it at once there.
  if(CMAKE_GENERATOR MATCHES "Ninja")
    set_tests_properties(failtest.${name}.ok failtest.${name}.ko PROPERTIES RESOURCE_LOCK fusedsl_build_tree)
  endif()
endfunction()

# fusedsl_add_area_tests(<prefix>): each <area>_test.cpp of the calling folder as its own small
# executable, <prefix>.<area>, labelled unit, so that the folder's tests compile in parallel and a
# failure points at one area.
function(fusedsl_add_area_tests prefix)
  file(GLOB _sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cpp)
  foreach(_src ${_sources})
    get_filename_component(_name ${_src} NAME_WE)
    string(REGEX REPLACE "_test$" "" _name ${_name})
    fusedsl_add_test(${prefix}.${_name} ${_src} LABELS unit)
  endforeach()
endfunction()

# fusedsl_test_paths(<target> <NAME> <path> [<NAME> <path>...]): each absolute <path> given to
# <target> as the string define <NAME>, written relative to the folder of the target's executable;
# the test reads it with fusedsl::test::test_path (tests/common/test_paths.hpp). An absolute path
# in a define would make every clone of the repository compile its own object: the compiler cache
# hashes the define as written.
function(fusedsl_test_paths target)
  get_target_property(_folder ${target} BINARY_DIR)
  set(_pairs ${ARGN})
  list(LENGTH _pairs _n)
  math(EXPR _odd "${_n} % 2")
  if(_n EQUAL 0 OR _odd)
    message(FATAL_ERROR "fusedsl_test_paths(${target}): expected NAME path pairs, got '${ARGN}'")
  endif()
  while(_pairs)
    list(POP_FRONT _pairs _name _path)
    file(RELATIVE_PATH _relative ${_folder} ${_path})
    target_compile_definitions(${target} PRIVATE ${_name}="${_relative}")
  endwhile()
endfunction()
