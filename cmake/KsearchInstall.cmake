include(CMakePackageConfigHelpers)

install(TARGETS ksearch EXPORT ksearchTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/ksearch DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY problems/ DESTINATION ${CMAKE_INSTALL_DATADIR}/ksearch/problems)
install(DIRECTORY prompts/ DESTINATION ${CMAKE_INSTALL_DATADIR}/ksearch/prompts OPTIONAL)
install(EXPORT ksearchTargets NAMESPACE ksearch:: FILE ksearchTargets.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ksearch)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ksearchConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/ksearchConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ksearch)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ksearchConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ksearchConfig.cmake
              ${PROJECT_BINARY_DIR}/ksearchConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ksearch)
