# `cmake --install`: headers, libpoolgen.a (the runtime), one archive per kernel and Halide's
# runtime under lib/poolgen/, a CMake package (find_package(poolgen) -> poolgen::poolgen) and a
# pkg-config file. The package is written by hand rather than exported: the kernel archives are
# plain files, and users must not need Halide to link them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(POOLGEN_KERNEL_DIR ${CMAKE_INSTALL_LIBDIR}/poolgen)
install(TARGETS poolgen ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/poolgen DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# Link order: libpoolgen.a, then the kernels it calls, then the Halide runtime they call.
set(POOLGEN_INSTALLED_ARCHIVES "")
set(POOLGEN_PKGCONFIG_LIBS "")
foreach (lib IN LISTS POOLGEN_KERNEL_LIBRARIES ITEMS poolgen_halide_runtime)
  install(FILES $<TARGET_FILE:${lib}> DESTINATION ${POOLGEN_KERNEL_DIR})
  list(APPEND POOLGEN_INSTALLED_ARCHIVES "\${_poolgen_prefix}/${POOLGEN_KERNEL_DIR}/lib${lib}.a")
  string(APPEND POOLGEN_PKGCONFIG_LIBS " -l${lib}")
endforeach ()

configure_package_config_file(
  cmake/poolgenConfig.cmake.in ${PROJECT_BINARY_DIR}/poolgenConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/poolgen)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/poolgenConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/poolgenConfig.cmake
              ${PROJECT_BINARY_DIR}/poolgenConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/poolgen)

file(RELATIVE_PATH POOLGEN_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
configure_file(cmake/poolgen.pc.in ${PROJECT_BINARY_DIR}/poolgen.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/poolgen.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
