# `cmake --install` lays out a package that find_package(Chorus) finds from other projects.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS chorus EXPORT ChorusTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/chorus DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(CHORUS_WITH_TORCH)
  install(TARGETS chorus_torch EXPORT ChorusTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()
# The launcher and the job-script templates it goes with.
install(TARGETS chorusrun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES launch/abci_qsub.sh launch/slurm_sbatch.sh
        DESTINATION ${CMAKE_INSTALL_DATADIR}/chorus/launch)
install(EXPORT ChorusTargets NAMESPACE Chorus::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Chorus)
configure_package_config_file(cmake/ChorusConfig.cmake.in
        ${PROJECT_BINARY_DIR}/ChorusConfig.cmake
        INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Chorus)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ChorusConfigVersion.cmake
        COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ChorusConfig.cmake
              ${PROJECT_BINARY_DIR}/ChorusConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Chorus)
