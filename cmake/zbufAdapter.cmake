# zbuf_adapter_library(): the two products every adapter installs, made one
# way.  From an OBJECT library it builds
#   <TARGET>          shared lib<OUTPUT>.so on top of the shared core,
#                     exported as zbuf::<EXPORT>
#   <TARGET>_static   static lib<OUTPUT>.a on top of zbuf_static (tests use
#                     it, so that one copy of the core counts every object),
#                     exported as zbuf::<EXPORT>_static
# and installs both with the headers of INCLUDE_DIR/zbuf, the export set
# <OUTPUT>Targets (cmake/zbufConfig.cmake.in includes it when present) and
# the pkg-config file pkgconfig/<OUTPUT>.pc.in.
#
#   zbuf_adapter_library(TARGET t OUTPUT name EXPORT exp OBJECTS objlib
#     [MAP version-script] [SHARED_LIBS ...] [STATIC_LIBS ...]
#     [STATIC_DEFINITIONS ...] [EXTRA_TARGETS targets installed in the set])
function(zbuf_adapter_library)
  cmake_parse_arguments(A "" "TARGET;OUTPUT;EXPORT;OBJECTS;MAP"
                        "SHARED_LIBS;STATIC_LIBS;STATIC_DEFINITIONS;EXTRA_TARGETS" ${ARGN})
  set(shared ${A_TARGET})
  set(static ${A_TARGET}_static)
  add_library(${shared} SHARED $<TARGET_OBJECTS:${A_OBJECTS}>)
  add_library(${static} STATIC $<TARGET_OBJECTS:${A_OBJECTS}>)
  target_link_libraries(${shared} PUBLIC ${A_SHARED_LIBS})
  target_link_libraries(${static} PUBLIC ${A_STATIC_LIBS})
  if(A_STATIC_DEFINITIONS)
    target_compile_definitions(${static} INTERFACE ${A_STATIC_DEFINITIONS})
  endif()
  # INSTALL_RPATH: the adapter finds libzbuf.so (and its sibling adapters)
  # in its own directory, whatever the prefix (see the top-level CMakeLists).
  set_target_properties(${shared} PROPERTIES OUTPUT_NAME ${A_OUTPUT} EXPORT_NAME ${A_EXPORT}
                        VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
                        INSTALL_RPATH "${ZBUF_LIB_RPATH}")
  if(A_MAP)
    set_target_properties(${shared} PROPERTIES LINK_OPTIONS "-Wl,--version-script=${A_MAP}"
                          LINK_DEPENDS ${A_MAP})
  endif()
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
