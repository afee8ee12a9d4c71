# SPDX-License-Identifier: MIT
# zbuf_adapter_library(): the two products every library above the core
# installs, made one way.  From an OBJECT library it builds
#   <TARGET>          shared lib<OUTPUT>.so on top of the shared core,
#                     exported as zbuf::<EXPORT>
#   <TARGET>_static   static lib<OUTPUT>.a on top of zbuf_static (tests use
#                     it, so that one copy of the core counts every object),
#                     exported as zbuf::<EXPORT>_static
# and installs both with the headers of INCLUDE_DIR/zbuf, the export set
# <OUTPUT>Targets (cmake/zbufConfig.cmake.in includes it when present) and
# the pkg-config file pkgconfig/<OUTPUT>.pc.in.
#
# One export scheme for every library, <MACRO> being its prefix (ZBUF_SOCK,
# ZBUF_UV, ...): its public header defines <MACRO>_EXPORT as
#     #if defined(<MACRO>_STATIC)        (empty: a static library)
#     #elif defined(<MACRO>_BUILDING)    __attribute__((visibility("default")))
#     #else                              (empty: a user of the shared library)
# and marks every public function with it; this function defines
# <MACRO>_BUILDING while the objects compile and gives users of the static
# library <MACRO>_STATIC.  Everything else stays hidden (the project's default
# visibility).  One symbol-version scheme: the shared library links with the
# version script <OUTPUT>.map beside the calling CMakeLists.txt, whose one
# node is <OUTPUT> in upper case with '_' for '-' and the version
# (ZBUF_SOCK_0.1 for zbuf-sock; checked here), whose global patterns are the
# library's prefixes, everything else local.
#
#   zbuf_adapter_library(TARGET t OUTPUT name EXPORT exp OBJECTS objlib MACRO prefix
#     [SHARED_LIBS ...] [STATIC_LIBS ...] [EXTRA_TARGETS targets installed in the set])
function(zbuf_adapter_library)
  cmake_parse_arguments(A "" "TARGET;OUTPUT;EXPORT;OBJECTS;MACRO"
                        "SHARED_LIBS;STATIC_LIBS;EXTRA_TARGETS" ${ARGN})
  if(A_UNPARSED_ARGUMENTS OR NOT A_MACRO)
    message(FATAL_ERROR "zbuf_adapter_library(${A_OUTPUT}): MACRO is required; "
                        "unknown arguments: ${A_UNPARSED_ARGUMENTS}")
  endif()
  set(map ${CMAKE_CURRENT_SOURCE_DIR}/${A_OUTPUT}.map)
  if(NOT EXISTS ${map})
    message(FATAL_ERROR "zbuf_adapter_library(${A_OUTPUT}): no version script ${map}")
  endif()
  string(TOUPPER "${A_OUTPUT}" node)
  string(REPLACE "-" "_" node "${node}_${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")
  file(STRINGS ${map} nodes REGEX "^[A-Za-z0-9_.]+ *{")
  if(NOT nodes MATCHES "^${node} *{$")
    message(FATAL_ERROR "zbuf_adapter_library(${A_OUTPUT}): ${map} must have the one "
                        "version node ${node}, not '${nodes}'")
  endif()
  target_compile_definitions(${A_OBJECTS} PRIVATE ${A_MACRO}_BUILDING)
  set(shared ${A_TARGET})
  set(static ${A_TARGET}_static)
  add_library(${shared} SHARED $<TARGET_OBJECTS:${A_OBJECTS}>)
  add_library(${static} STATIC $<TARGET_OBJECTS:${A_OBJECTS}>)
  target_link_libraries(${shared} PUBLIC ${A_SHARED_LIBS})
  target_link_libraries(${static} PUBLIC ${A_STATIC_LIBS})
  target_compile_definitions(${static} INTERFACE ${A_MACRO}_STATIC)
  # INSTALL_RPATH: the adapter finds libzbuf.so (and its sibling adapters)
  # in its own directory, whatever the prefix (see the top-level CMakeLists).
  set_target_properties(${shared} PROPERTIES OUTPUT_NAME ${A_OUTPUT} EXPORT_NAME ${A_EXPORT}
                        VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
                        INSTALL_RPATH "${ZBUF_LIB_RPATH}"
                        LINK_OPTIONS "-Wl,--version-script=${map}" LINK_DEPENDS ${map})
  set_target_properties(${static} PROPERTIES OUTPUT_NAME ${A_OUTPUT}
                        EXPORT_NAME ${A_EXPORT}_static)
  foreach(t ${shared} ${static})
    target_include_directories(${t} PUBLIC
      $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    if(ZBUF_SANITIZE)
      target_link_options(${t} PUBLIC -fsanitize=${ZBUF_SANITIZE})
    endif()
  endforeach()
  add_library(zbuf::${A_EXPORT} ALIAS ${shared})
  add_library(zbuf::${A_EXPORT}_static ALIAS ${static})

  install(TARGETS ${shared} ${static} ${A_EXTRA_TARGETS} EXPORT ${A_OUTPUT}Targets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT devel
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(DIRECTORY include/zbuf DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT devel)
  install(EXPORT ${A_OUTPUT}Targets NAMESPACE zbuf:: FILE ${A_OUTPUT}Targets.cmake
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zbuf COMPONENT devel)
  zbuf_pkgconfig(${A_OUTPUT})
endfunction()

# zbuf_adapter_enabled(<var> NAME name OPTION opt [LINUX] [NEEDS target...]
#                      [SYMBOL sym HEADERS header...])
# Whether the component `name` is to be built here: <var> is set TRUE, or
# FALSE with a status line saying why (the option is off, not Linux, a
# library it needs is not built, the system headers lack a symbol it needs).
# The caller returns when it is FALSE.
function(zbuf_adapter_enabled var)
  cmake_parse_arguments(A "LINUX" "NAME;OPTION;SYMBOL" "NEEDS;HEADERS" ${ARGN})
  set(${var} FALSE PARENT_SCOPE)
  if(NOT ${A_OPTION})
    message(STATUS "${A_NAME}: disabled (${A_OPTION}=OFF)")
    return()
  endif()
  if(A_LINUX AND NOT CMAKE_SYSTEM_NAME STREQUAL "Linux")
    message(STATUS "${A_NAME}: not Linux; not built")
    return()
  endif()
  foreach(t IN LISTS A_NEEDS)
    if(NOT TARGET ${t})
      message(STATUS "${A_NAME}: needs ${t}, which is not built; not built")
      return()
    endif()
  endforeach()
  if(A_SYMBOL)
    include(CheckSymbolExists)
    string(MAKE_C_IDENTIFIER "ZBUF_HAVE_${A_SYMBOL}" have)
    check_symbol_exists(${A_SYMBOL} "${A_HEADERS}" ${have})
    if(NOT ${have})
      message(STATUS "${A_NAME}: the system headers (${A_HEADERS}) lack ${A_SYMBOL}; not built")
      return()
    endif()
  endif()
  set(${var} TRUE PARENT_SCOPE)
endfunction()

# zbuf_adapter_objects(objlib SOURCES file... [INCLUDES dir...]
#                      [PRIVATE_INCLUDES dir...] [LIBS lib...])
# The OBJECT library a zbuf_adapter_library() is made from, with the
# project's warnings and sanitizers.  Its users (in the build tree) get the
# headers of this directory's include/, of the core and of INCLUDES (the
# public headers of the libraries it builds on); PRIVATE_INCLUDES are for
# its own sources only; LIBS are linked PUBLIC (Threads::Threads).
function(zbuf_adapter_objects name)
  cmake_parse_arguments(A "" "" "SOURCES;INCLUDES;PRIVATE_INCLUDES;LIBS" ${ARGN})
  add_library(${name} OBJECT ${A_SOURCES})
  foreach(dir ${CMAKE_CURRENT_SOURCE_DIR}/include ${A_INCLUDES} ${PROJECT_SOURCE_DIR}/include)
    target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${dir}>)
  endforeach()
  target_include_directories(${name} PRIVATE ${A_PRIVATE_INCLUDES})
  target_link_libraries(${name} PUBLIC ${A_LIBS})
  zbuf_target_defaults(${name})
endfunction()

# zbuf_uv_library(TARGET t OUTPUT name MACRO prefix EXPORT exp ON base
#                 SOURCES file... [INCLUDES dir...])
# The libuv driver of the library target `base` (zbuf-stack-uv,
# zbuf-uring-uv, zbuf-udpstream-uv): a library of its own on top of `base`
# and libuv, so that `base` never needs libuv; made by
# zbuf_adapter_objects() and zbuf_adapter_library().  Not built, with a
# status line, when ZBUF_WITH_UV is off or libuv was not found (callers
# test if(TARGET t)).
function(zbuf_uv_library)
  cmake_parse_arguments(A "" "TARGET;OUTPUT;MACRO;EXPORT;ON" "SOURCES;INCLUDES" ${ARGN})
  zbuf_adapter_enabled(enabled NAME ${A_OUTPUT} OPTION ZBUF_WITH_UV)
  if(enabled AND NOT ZBUF_LIBUV_FOUND)
    message(STATUS "${A_OUTPUT}: libuv not found (Debian: libuv1-dev); not built")
    set(enabled FALSE)
  endif()
  if(NOT enabled)
    return()
  endif()
  zbuf_adapter_objects(${A_TARGET}_obj SOURCES ${A_SOURCES} INCLUDES ${A_INCLUDES}
    PRIVATE_INCLUDES ${ZBUF_LIBUV_INCLUDE_DIRS})
  zbuf_adapter_library(TARGET ${A_TARGET} OUTPUT ${A_OUTPUT} MACRO ${A_MACRO} EXPORT ${A_EXPORT}
    OBJECTS ${A_TARGET}_obj
    SHARED_LIBS ${A_ON} ${ZBUF_LIBUV_LINK} STATIC_LIBS ${A_ON}_static ${ZBUF_LIBUV_LINK})
endfunction()

# zbuf_adapter_parts([TESTS dir] [EXAMPLES dir] [BENCH dir] [FUZZ dir]
#                    [BENCH_EXAMPLES dir])
# Adds the subdirectories of a component that the build asks for: TESTS
# with ZBUF_BUILD_TESTS, EXAMPLES with ZBUF_BUILD_EXAMPLES, BENCH with
# ZBUF_BUILD_BENCH, BENCH_EXAMPLES (examples that are benchmark programs
# too) with either, FUZZ with ZBUF_FUZZ and clang.
macro(zbuf_adapter_parts)
  cmake_parse_arguments(P "" "TESTS;EXAMPLES;BENCH;FUZZ;BENCH_EXAMPLES" "" ${ARGN})
  if(P_TESTS AND ZBUF_BUILD_TESTS)
    add_subdirectory(${P_TESTS})
  endif()
  if(P_EXAMPLES AND ZBUF_BUILD_EXAMPLES)
    add_subdirectory(${P_EXAMPLES})
  endif()
  if(P_BENCH_EXAMPLES AND (ZBUF_BUILD_EXAMPLES OR ZBUF_BUILD_BENCH))
    add_subdirectory(${P_BENCH_EXAMPLES})
  endif()
  if(P_FUZZ AND ZBUF_FUZZ AND CMAKE_C_COMPILER_ID STREQUAL "Clang")
    add_subdirectory(${P_FUZZ})
  endif()
  if(P_BENCH AND ZBUF_BUILD_BENCH)
    add_subdirectory(${P_BENCH})
  endif()
endmacro()
