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
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_definitions(${name} PRIVATE
    GPUFLEET_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    GPUFLEET_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared")
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "unit;${ARG_LABELS}" TIMEOUT 600)
  set_property(GLOBAL APPEND PROPERTY GPUFLEET_UNIT_TESTS ${name})
  if("tsan" IN_LIST ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY GPUFLEET_TSAN_TESTS ${name})
  endif()
endfunction()

# gpufleet_integration_test(<name> SOURCES files... DEPS targets... [SERIAL])
# A GoogleTest binary that talks to the kube-local control plane started by the
# `kube_local` CTest fixture; it reads the admin kubeconfig path from $KUBECONFIG and the
# control plane's data directory from $GPUFLEET_KUBE_LOCAL_DIR (for restart tests).
function(gpufleet_integration_test name)
  cmake_parse_arguments(ARG "SERIAL" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_definitions(${name} PRIVATE
    GPUFLEET_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    GPUFLEET_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared")
  add_test(NAME ${name} COMMAND ${name})
  gpufleet_integration_properties(${name})
endfunction()

# Properties every integration test shares: the fixture, the environment, the label.
function(gpufleet_integration_properties test)
  set_tests_properties(${test} PROPERTIES
    LABELS integration
    FIXTURES_REQUIRED kube_local
    RESOURCE_LOCK kube_local
    TIMEOUT 900
    ENVIRONMENT "KUBECONFIG=${GPUFLEET_KUBE_LOCAL_DIR}/admin.kubeconfig;GPUFLEET_KUBE_LOCAL_DIR=${GPUFLEET_KUBE_LOCAL_DIR};KUBE_LOCAL_BIN=${GPUFLEET_KUBE_LOCAL_BIN};GPUFLEET_BIN=$<TARGET_FILE:gpufleet>")
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
