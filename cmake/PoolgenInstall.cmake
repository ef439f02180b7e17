# `cmake --install`: headers, the runtime (libpoolgen.a, or its sources in a kernels-only build),
# one archive per kernel and Halide's runtime under lib/poolgen/, a CMake package
# (find_package(poolgen) -> poolgen::poolgen) and, with a compiled runtime, a pkg-config file.
# The package is written by hand rather than exported: the kernel archives are plain files
# (IMPORTED ones for cross targets), and users must not need Halide to link them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(POOLGEN_KERNEL_DIR ${CMAKE_INSTALL_LIBDIR}/poolgen)
set(POOLGEN_RUNTIME_SOURCE_DIR ${CMAKE_INSTALL_DATADIR}/poolgen/runtime)
install(DIRECTORY include/poolgen DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# Link order: libpoolgen.a, then the kernels it calls, then the Halide runtime they call.
set(POOLGEN_INSTALLED_ARCHIVES "")
set(POOLGEN_PKGCONFIG_LIBS "")
foreach (lib IN LISTS POOLGEN_KERNEL_LIBRARIES ITEMS poolgen_halide_runtime)
  # Archives for other platforms keep their own names (Windows: name.lib).
  get_target_property(file ${lib} IMPORTED_LOCATION)
  if (file)
    get_filename_component(file "${file}" NAME)
  else ()
    set(file ${CMAKE_STATIC_LIBRARY_PREFIX}${lib}${CMAKE_STATIC_LIBRARY_SUFFIX})
  endif ()
  install(FILES $<TARGET_FILE:${lib}> DESTINATION ${POOLGEN_KERNEL_DIR})
  list(APPEND POOLGEN_INSTALLED_ARCHIVES "\${_poolgen_prefix}/${POOLGEN_KERNEL_DIR}/${file}")
  string(APPEND POOLGEN_PKGCONFIG_LIBS " -l${lib}")
endforeach ()

if (POOLGEN_BUILD_RUNTIME)
  install(TARGETS poolgen ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  file(RELATIVE_PATH POOLGEN_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
  configure_file(cmake/poolgen.pc.in ${PROJECT_BINARY_DIR}/poolgen.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/poolgen.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  if (TARGET poolgen_shared)  # libpoolgen.so (the C API): poolgen::shared, pkg-config poolgen-shared
    install(TARGETS poolgen_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
    configure_file(cmake/poolgen-shared.pc.in ${PROJECT_BINARY_DIR}/poolgen-shared.pc @ONLY)
    install(FILES ${PROJECT_BINARY_DIR}/poolgen-shared.pc
            DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  endif ()
else ()
  # The runtime as sources, with what they include: the kernel table and Halide's runtime
  # headers (from the wheel's SDK, CMakeLists.txt's POOLGEN_HALIDE_PREFIX).
  file(GLOB halide_runtime_headers "${POOLGEN_HALIDE_PREFIX}/include/HalideRuntime*.h")
  if (NOT halide_runtime_headers)
    message(FATAL_ERROR "No HalideRuntime*.h under ${POOLGEN_HALIDE_PREFIX}/include")
  endif ()
  # The runtime's layers (runtime/core, validate, ...) keep their folders: its includes name them.
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/ DESTINATION ${POOLGEN_RUNTIME_SOURCE_DIR}
          FILES_MATCHING PATTERN "*.cpp" PATTERN "*.hpp" PATTERN "tsan_memory_hooks.cpp" EXCLUDE)
  install(FILES ${halide_runtime_headers} ${PROJECT_BINARY_DIR}/generated/kernel_table.inc
                ${PROJECT_BINARY_DIR}/generated/backward_kernel_table.inc
          DESTINATION ${POOLGEN_RUNTIME_SOURCE_DIR})
endif ()

configure_package_config_file(
  cmake/poolgenConfig.cmake.in ${PROJECT_BINARY_DIR}/poolgenConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/poolgen)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/poolgenConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/poolgenConfig.cmake
              ${PROJECT_BINARY_DIR}/poolgenConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/poolgen)
