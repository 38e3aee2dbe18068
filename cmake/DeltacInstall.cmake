#===- DeltacInstall.cmake - cmake --install and the CMake package -------===#
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS deltac deltac-opt EXPORT deltacTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT deltacTargets NAMESPACE deltac::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/deltac)
# The runtime headers every generated library carries, for code that only
# passes deltac_decode_args around.
install(FILES ${PROJECT_SOURCE_DIR}/templates/runtime/deltac_api.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/deltac)

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/deltacConfig.cmake.in
  ${PROJECT_BINARY_DIR}/deltacConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/deltac
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/deltacConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/deltacConfig.cmake
              ${PROJECT_BINARY_DIR}/deltacConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/DeltacKernels.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/deltac)
