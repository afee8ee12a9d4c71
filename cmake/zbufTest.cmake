# SPDX-License-Identifier: MIT
# Test programs, made one way for every directory (included by the top-level
# CMakeLists.txt when ZBUF_BUILD_TESTS is on).  Criterion is looked up here,
# once; every test directory uses zbuf_add_test_support(), zbuf_add_test()
# and zbuf_add_tests().
#
# Test names follow one pattern, <component>_<file>: core_threads for
# test/test_threads.c, uv_pause_thread for adapters/uv/test/test_uv_pause_thread.c,
# stack_tcp_wire for adapters/stack/test/test_tcp_wire.c.  The program (the
# CMake target) has the test's name.
#
# Labels: every test carries its component's labels; a test whose name
# contains "thread" also carries "threads", which scripts/test.sh runs under
# ThreadSanitizer (see zbuf_add_test's NO_TSAN).
pkg_check_modules(CRITERION REQUIRED IMPORTED_TARGET criterion)

# zbuf_add_test_support(name [SOURCES src...] [LIBRARIES lib...] [INCLUDES dir...])
# The static support library of a directory's tests: test/support.c (leak
# baseline and check, chain checks, fault injection) and the directory's own
# helpers (SOURCES), linked PUBLIC with LIBRARIES (the static library under
# test), Criterion and threads; test/ and INCLUDES go on its users' include
# path.
function(zbuf_add_test_support name)
  cmake_parse_arguments(S "" "" "SOURCES;LIBRARIES;INCLUDES" ${ARGN})
  add_library(${name} STATIC ${PROJECT_SOURCE_DIR}/test/support.c ${S_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/test ${S_INCLUDES})
  target_link_libraries(${name} PUBLIC ${S_LIBRARIES} PkgConfig::CRITERION Threads::Threads)
  zbuf_target_defaults(${name})
endfunction()

# zbuf_add_test(NAME name SOURCES src...
#   [LIBRARIES lib...]      linked PRIVATE (a support library, an adapter)
#   [INCLUDES dir...] [DEFINITIONS def...] [DEPENDS target...]
#   [LABELS label...]       "threads" is added when the name contains "thread"
#   [TIMEOUT seconds]       default 600
#   [SKIP_RETURN_CODE n]
#   [PLAIN]                 a plain C program with its own main(), not a
#                           Criterion runner (it runs under TSan, where
#                           Criterion's runner cannot start)
#   [NO_TSAN])              a Criterion program without a TSan main(): its
#                           "threads" label is dropped in a TSan build
#
# A Criterion program runs with one worker (--jobs 1: the machine is small
# and some tests time themselves out).
function(zbuf_add_test)
  cmake_parse_arguments(T "PLAIN;NO_TSAN" "NAME;TIMEOUT;SKIP_RETURN_CODE"
                        "SOURCES;LIBRARIES;INCLUDES;DEFINITIONS;DEPENDS;LABELS" ${ARGN})
  if(NOT T_NAME OR NOT T_SOURCES)
    message(FATAL_ERROR "zbuf_add_test: NAME and SOURCES are required")
  endif()
  if(T_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "zbuf_add_test(${T_NAME}): unknown arguments ${T_UNPARSED_ARGUMENTS}")
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBRARIES} Threads::Threads)
  if(T_INCLUDES)
    target_include_directories(${T_NAME} PRIVATE ${T_INCLUDES})
  endif()
  if(T_DEFINITIONS)
    target_compile_definitions(${T_NAME} PRIVATE ${T_DEFINITIONS})
  endif()
  if(T_DEPENDS)
    add_dependencies(${T_NAME} ${T_DEPENDS})
  endif()
  zbuf_target_defaults(${T_NAME})
  if(T_PLAIN)
    add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  else()
    target_link_libraries(${T_NAME} PRIVATE PkgConfig::CRITERION)
    add_test(NAME ${T_NAME} COMMAND ${T_NAME} --jobs 1 --ascii)
  endif()
  set(labels ${T_LABELS})
  if(T_NAME MATCHES "thread" AND NOT (T_NO_TSAN AND ZBUF_SANITIZE MATCHES "thread"))
    list(APPEND labels threads)
  endif()
  list(REMOVE_DUPLICATES labels)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${labels}")
  if(DEFINED T_SKIP_RETURN_CODE)
    set_tests_properties(${T_NAME} PROPERTIES SKIP_RETURN_CODE ${T_SKIP_RETURN_CODE})
  endif()
endfunction()

# zbuf_add_tests(COMPONENT c [DIRECTORY dir] [STRIP prefix] [EXCLUDE file...]
#                <any zbuf_add_test() option but NAME and SOURCES>)
# One Criterion test per DIRECTORY/test_*.c (default: the current source
# directory), named <c>_<file>: the file's name without "test_" and without
# a leading "<STRIP>_" (STRIP defaults to the component), or <c> alone when
# the rest is STRIP itself (test_uv_pause.c in component uv: uv_pause;
# test_ip_uv.c in component stack_uv with STRIP ip_uv: stack_uv).  The files
# named in EXCLUDE (e.g. test_interop.c) are left to an explicit
# zbuf_add_test() with their own options.
function(zbuf_add_tests)
  cmake_parse_arguments(G "" "COMPONENT;DIRECTORY;STRIP" "EXCLUDE" ${ARGN})
  if(NOT G_COMPONENT)
    message(FATAL_ERROR "zbuf_add_tests: COMPONENT is required")
  endif()
  if(NOT G_DIRECTORY)
    set(G_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  if(NOT G_STRIP)
    set(G_STRIP ${G_COMPONENT})
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${G_DIRECTORY}/test_*.c)
  if(NOT sources)
    message(FATAL_ERROR "zbuf_add_tests(${G_COMPONENT}): no test_*.c in ${G_DIRECTORY}")
  endif()
  foreach(src IN LISTS sources)
    get_filename_component(file ${src} NAME)
    if(file IN_LIST G_EXCLUDE)
      continue()
    endif()
    get_filename_component(stem ${src} NAME_WE)
    string(REGEX REPLACE "^test_" "" stem ${stem})
    if(stem STREQUAL G_STRIP)
      set(name ${G_COMPONENT})
    else()
      string(REGEX REPLACE "^${G_STRIP}_" "" stem ${stem})
      set(name ${G_COMPONENT}_${stem})
    endif()
    zbuf_add_test(NAME ${name} SOURCES ${src} ${G_UNPARSED_ARGUMENTS})
  endforeach()
  foreach(file IN LISTS G_EXCLUDE)
    if(NOT EXISTS ${G_DIRECTORY}/${file})
      message(FATAL_ERROR "zbuf_add_tests(${G_COMPONENT}): EXCLUDE names ${file}, which does not exist")
    endif()
  endforeach()
endfunction()
