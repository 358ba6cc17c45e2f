# Helpers that keep each module's CMakeLists.txt to a few lines.

# gpufleet_module(<name> [SUBDIRS folders...] [DEPS targets...] [PRIVATE_DEPS targets...])
# Library gpufleet_<name> (alias gpufleet::<name>) from src/<name>/*.cc and the *.cc of the
# SUBDIRS folders (a module's pipelines: cel's stdlib/, recipe's bundle/ and live/). Headers
# are included as "<name>/file.h" or "<name>/<folder>/file.h" from src/. A module without
# sources yet is an INTERFACE library, so dependents can name it before it has code.
function(gpufleet_module name)
  cmake_parse_arguments(ARG "" "" "SUBDIRS;DEPS;PRIVATE_DEPS" ${ARGN})
  set(patterns ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  foreach(dir ${ARG_SUBDIRS})
    list(APPEND patterns ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.cc)
  endforeach()
  file(GLOB sources CONFIGURE_DEPENDS ${patterns})
  if(sources)
    add_library(gpufleet_${name} STATIC ${sources})
    target_include_directories(gpufleet_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(gpufleet_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  else()
    add_library(gpufleet_${name} INTERFACE)
    target_include_directories(gpufleet_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(gpufleet_${name} INTERFACE ${ARG_DEPS})
  endif()
  add_library(gpufleet::${name} ALIAS gpufleet_${name})
endfunction()

# gpufleet_unit_test(<name> SOURCES files... DEPS targets... [LABELS extra...])
# One GoogleTest binary, registered with CTest under label `unit` (plus LABELS, e.g. `tsan`
# for tests that also run under ThreadSanitizer).
function(gpufleet_unit_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock
    gpufleet_test_paths)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "unit;${ARG_LABELS}" TIMEOUT 600)
  set_property(GLOBAL APPEND PROPERTY GPUFLEET_UNIT_TESTS ${name})
  if("tsan" IN_LIST ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY GPUFLEET_TSAN_TESTS ${name})
  endif()
endfunction()

# gpufleet_integration_test(<name> SOURCES files... DEPS targets... [SHARDS n])
# A GoogleTest binary that talks to a kube-local control plane started by a `kube_local_<lane>`
# CTest fixture; it reads the admin kubeconfig path from $KUBECONFIG and the control plane's
# data directory from $GPUFLEET_KUBE_LOCAL_DIR (for restart tests). SHARDS n registers n CTest
# entries (<name>_shard<i>, gtest's own sharding), which the lanes then balance.
function(gpufleet_integration_test name)
  cmake_parse_arguments(ARG "" "SHARDS" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock
    gpufleet_test_paths)
  if(NOT ARG_SHARDS OR ARG_SHARDS LESS 2)
    add_test(NAME ${name} COMMAND ${name})
    gpufleet_integration_properties(${name})
    return()
  endif()
  math(EXPR last "${ARG_SHARDS} - 1")
  foreach(shard RANGE ${last})
    add_test(NAME ${name}_shard${shard} COMMAND ${name})
    gpufleet_integration_properties(${name}_shard${shard}
      ENV GTEST_TOTAL_SHARDS=${ARG_SHARDS} GTEST_SHARD_INDEX=${shard})
  endforeach()
endfunction()

# Integration lanes. Each lane is its own kube-local (fixture `kube_local_<lane>`, data in
# build/<tree>/kube-local-test-<lane>), and runs one test at a time (RESOURCE_LOCK), so the
# lanes run side by side under `ctest -j` while no two tests ever share an API server. Tests
# go to lanes by the longest-first greedy rule over the measured seconds in
# tests/integration/lane-costs.txt (refresh: scripts/update-lane-costs.sh build/asan); a test
# not listed there counts 15 s and takes the least-loaded lane when it is registered.
set(GPUFLEET_INTEGRATION_LANES 2 CACHE STRING "kube-local control planes the integration tests run on side by side")
if(NOT GPUFLEET_INTEGRATION_LANES MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "GPUFLEET_INTEGRATION_LANES='${GPUFLEET_INTEGRATION_LANES}' is not a count; "
                      "set it to 1 or more (-DGPUFLEET_INTEGRATION_LANES=2)")
endif()

function(gpufleet_lane_dir lane out)
  set(${out} "${PROJECT_BINARY_DIR}/kube-local-test-${lane}" PARENT_SCOPE)
endfunction()

# Plans the lanes of every test in lane-costs.txt once, longest first onto the least-loaded lane.
function(gpufleet_plan_lanes)
  get_property(planned GLOBAL PROPERTY GPUFLEET_LANES_PLANNED)
  if(planned)
    return()
  endif()
  set_property(GLOBAL PROPERTY GPUFLEET_LANES_PLANNED TRUE)
  math(EXPR last "${GPUFLEET_INTEGRATION_LANES} - 1")
  foreach(lane RANGE ${last})
    set(load_${lane} 0)
  endforeach()
  set(entries "")
  set(costs_file "${PROJECT_SOURCE_DIR}/tests/integration/lane-costs.txt")
  set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${costs_file}")
  file(STRINGS "${costs_file}" lines REGEX "^[a-z0-9_]+ [0-9]+$")
  foreach(line ${lines})
    string(REPLACE " " ";" pair "${line}")
    list(GET pair 0 test)
    list(GET pair 1 seconds)
    string(LENGTH "${seconds}" digits)
    math(EXPR pad "8 - ${digits}")
    string(REPEAT "0" ${pad} zeros)
    list(APPEND entries "${zeros}${seconds}:${test}")
  endforeach()
  list(SORT entries COMPARE NATURAL ORDER DESCENDING)
  foreach(entry ${entries})
    string(REPLACE ":" ";" pair "${entry}")
    list(GET pair 0 seconds)
    list(GET pair 1 test)
    math(EXPR seconds "${seconds}")  # drops the zero padding
    set(best 0)
    foreach(lane RANGE ${last})
      if(load_${lane} LESS load_${best})
        set(best ${lane})
      endif()
    endforeach()
    math(EXPR load_${best} "${load_${best}} + ${seconds}")
    set_property(GLOBAL PROPERTY GPUFLEET_LANE_OF_${test} ${best})
    set_property(GLOBAL PROPERTY GPUFLEET_COST_OF_${test} ${seconds})
  endforeach()
  foreach(lane RANGE ${last})
    set_property(GLOBAL PROPERTY GPUFLEET_LANE_LOAD_${lane} ${load_${lane}})
  endforeach()
endfunction()

# The lane of `test` (planned, or the least-loaded one for a test lane-costs.txt does not list).
function(gpufleet_lane_of test out_lane out_cost)
  gpufleet_plan_lanes()
  get_property(lane GLOBAL PROPERTY GPUFLEET_LANE_OF_${test})
  get_property(cost GLOBAL PROPERTY GPUFLEET_COST_OF_${test})
  # Quoted: get_property leaves `lane` undefined for an unlisted test, and an undefined name in
  # if() is compared as the literal string "lane".
  if("${lane}" STREQUAL "")
    set(cost 15)
    math(EXPR last "${GPUFLEET_INTEGRATION_LANES} - 1")
    set(lane 0)
    get_property(best_load GLOBAL PROPERTY GPUFLEET_LANE_LOAD_0)
    foreach(candidate RANGE ${last})
      get_property(load GLOBAL PROPERTY GPUFLEET_LANE_LOAD_${candidate})
      if(load LESS best_load)
        set(lane ${candidate})
        set(best_load ${load})
      endif()
    endforeach()
    math(EXPR best_load "${best_load} + ${cost}")
    set_property(GLOBAL PROPERTY GPUFLEET_LANE_LOAD_${lane} ${best_load})
  endif()
  set(${out_lane} ${lane} PARENT_SCOPE)
  set(${out_cost} ${cost} PARENT_SCOPE)
endfunction()

# Properties every integration test shares: its lane's fixture, lock and environment, the label.
# gpufleet_integration_properties(<test> [ENV VAR=value...])
function(gpufleet_integration_properties test)
  cmake_parse_arguments(ARG "" "" "ENV" ${ARGN})
  gpufleet_lane_of(${test} lane cost)
  gpufleet_lane_dir(${lane} dir)
  set_tests_properties(${test} PROPERTIES
    LABELS integration
    FIXTURES_REQUIRED kube_local_${lane}
    RESOURCE_LOCK kube_local_${lane}
    COST ${cost}
    TIMEOUT 900
    ENVIRONMENT "KUBECONFIG=${dir}/admin.kubeconfig;GPUFLEET_KUBE_LOCAL_DIR=${dir};KUBE_LOCAL_BIN=${GPUFLEET_KUBE_LOCAL_BIN};GPUFLEET_BIN=$<TARGET_FILE:gpufleet>;GPUFLEET_INTEGRATION_LANE=${lane}")
  if(ARG_ENV)
    set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT ${ARG_ENV})
  endif()
endfunction()

# gpufleet_embed_tree(<target> DIR data/x INCLUDE module/h.h NAMESPACE gpufleet::x TYPE T
#                     FUNCTION name [GLOB pattern])
# Compiles every data/x/**/*.yaml (or GLOB, e.g. "*" for a whole chart) into <target> as
# `std::vector<T> name()` (see cmake/embed_tree.cmake); regenerated when a file changes,
# rewritten only when its text does.
function(gpufleet_embed_tree target)
  cmake_parse_arguments(ARG "" "DIR;INCLUDE;NAMESPACE;TYPE;FUNCTION;GLOB" "" ${ARGN})
  if(NOT ARG_GLOB)
    set(ARG_GLOB "*.yaml")
  endif()
  file(GLOB_RECURSE files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${ARG_DIR}/${ARG_GLOB})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${ARG_FUNCTION}.cc)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DDATA_DIR=${PROJECT_SOURCE_DIR}/${ARG_DIR} -DORIGIN=${ARG_DIR}
            -DOUT=${out} -DINCLUDE=${ARG_INCLUDE} -DNAMESPACE=${ARG_NAMESPACE} -DTYPE=${ARG_TYPE}
            -DFUNCTION=${ARG_FUNCTION} "-DGLOB=${ARG_GLOB}"
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_tree.cmake
    DEPENDS ${files} ${PROJECT_SOURCE_DIR}/cmake/embed_tree.cmake
    COMMENT "Embedding ${ARG_DIR}")
  target_sources(${target} PRIVATE ${out})
endfunction()
