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
