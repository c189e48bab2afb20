# cmake -DBUILD_DIR=... -DWORK_DIR=... -DDOWNSTREAM_DIR=... -DGENERATOR=... -DCXX_COMPILER=...
#       [-DCXX_LAUNCHER=...] [-DCXX_FLAGS=...] [-DEXE_LINKER_FLAGS=...] [-DWITH_TEXT=ON]
#       -P install_check.cmake
# CXX_FLAGS and EXE_LINKER_FLAGS: the build's own (a sanitizer's, say), which the downstream project
# needs too, since it links the installed fusedsl::compiled built with them.
# 1. cmake --install BUILD_DIR into WORK_DIR/prefix (emptied first, so nothing stale is found);
# 2. configure DOWNSTREAM_DIR with only that prefix on CMAKE_PREFIX_PATH, build it, run `app`
#    (header-only), `compiled_app` (fusedsl::compiled) and, WITH_TEXT, `text_app`, which uses
#    fusedsl::text and the safetensors reader.
function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${step} failed (${rc}):\n  ${ARGN}\n${out}")
  endif()
  message(STATUS "install test: ${step}: ok")
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(build ${WORK_DIR}/downstream-build)
file(REMOVE_RECURSE ${prefix} ${build})

run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/include/fusedsl/fusedsl.hpp)
  message(FATAL_ERROR "install test: ${prefix}/include/fusedsl/fusedsl.hpp was not installed")
endif()
file(GLOB_RECURSE config ${prefix}/*/fusedslConfig.cmake)
if(NOT config)
  message(FATAL_ERROR "install test: no fusedslConfig.cmake under ${prefix}")
endif()

set(launcher "")
if(CXX_LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER})
endif()
run("configure the downstream project" ${CMAKE_COMMAND} -S ${DOWNSTREAM_DIR} -B ${build} -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${launcher}
    "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}"
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run("build the downstream project" ${CMAKE_COMMAND} --build ${build})
run("run the downstream app" ${build}/app)
if(NOT last_output MATCHES "layers")
  message(FATAL_ERROR "install test: the app's graph text does not mention the stacked layers:\n${last_output}")
endif()
run("run the downstream compiled_app" ${build}/compiled_app)
if(NOT last_output MATCHES "reprinted identically")
  message(FATAL_ERROR "install test: compiled_app printed something else:\n${last_output}")
endif()
if(WITH_TEXT)
  run("run the downstream text_app" ${build}/text_app)
  if(NOT last_output MATCHES "w\\[1\\]=-2 ids=2 5 6 1 3")
    message(FATAL_ERROR "install test: text_app printed something else:\n${last_output}")
  endif()
endif()
message(STATUS "install test: the downstream project built and ran against ${prefix}")
