# `cmake --install` lays out a package that find_package(Chorus) finds from other projects.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS chorus EXPORT ChorusTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/chorus DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} PATTERN "*.in" EXCLUDE)
install(FILES ${CHORUS_GENERATED_INCLUDE_DIR}/chorus/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/chorus)
# Chorus::torch in a file of its own, which ChorusConfig.cmake loads only for a consumer that
# asks for LibTorch: a C++-only trainer needs no LibTorch module loaded.
if(CHORUS_WITH_TORCH)
  install(TARGETS chorus_torch EXPORT ChorusTorchTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT ChorusTorchTargets NAMESPACE Chorus::
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Chorus)
endif()
# The launcher and the job-script templates it goes with.
install(TARGETS chorusrun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS launch/abci_qsub.sh launch/slurm_sbatch.sh launch/computecanada_sbatch.sh
        DESTINATION ${CMAKE_INSTALL_DATADIR}/chorus/launch)
# The Python examples (horovod.torch scripts run with chorus.torch) and the license.
install(DIRECTORY examples/python/ DESTINATION ${CMAKE_INSTALL_DATADIR}/chorus/examples
        FILES_MATCHING PATTERN "*.py")
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
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

# An Lmod modulefile for the prefix, written at install time (the prefix is known only then):
# <prefix>/share/modulefiles/chorus/<version>.lua (cmake/chorus.lua.in says what it sets).
set(CHORUS_MODULE_DEPENDS_ON "" CACHE STRING
    "Modules the chorus modulefile loads first (Lmod depends_on), e.g. \"openmpi/4.1;cuda/12.4\"")
set(CHORUS_MODULE_DEPENDS "")
foreach(_module IN LISTS CHORUS_MODULE_DEPENDS_ON)
  string(APPEND CHORUS_MODULE_DEPENDS "depends_on(\"${_module}\")\n")
endforeach()
set(CHORUS_MODULE_WHAT "")
if(CHORUS_WITH_CUDA)
  string(APPEND CHORUS_MODULE_WHAT ", CUDA ${CHORUS_CUDA_VERSION}")
endif()
if(CHORUS_WITH_NCCL)
  string(APPEND CHORUS_MODULE_WHAT ", NCCL ${CHORUS_NCCL_VERSION}")
endif()
if(CHORUS_WITH_TORCH)
  string(APPEND CHORUS_MODULE_WHAT ", LibTorch ${Torch_VERSION}")
endif()
set(CHORUS_MODULE_PYTHONPATH "")
if(CHORUS_WITH_PYTHON)
  string(APPEND CHORUS_MODULE_WHAT ", chorus.torch for Python ${Python_VERSION_MAJOR}.${Python_VERSION_MINOR}")
  set(CHORUS_MODULE_PYTHONPATH
      "prepend_path(\"PYTHONPATH\", pathJoin(prefix, \"${CHORUS_PYTHON_INSTALL_DIR}\"))")
endif()
# Two passes: configure fills in the build's values and keeps the prefix's placeholders.
set(CHORUS_MODULE_PREFIX "@CHORUS_MODULE_PREFIX@")
set(CHORUS_MODULE_ROOT "@CHORUS_MODULE_ROOT@")
configure_file(cmake/chorus.lua.in ${PROJECT_BINARY_DIR}/chorus.lua.in @ONLY)
install(CODE "
  set(CHORUS_MODULE_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(CHORUS_MODULE_ROOT \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/modulefiles\")
  set(_file \"\$ENV{DESTDIR}\${CHORUS_MODULE_ROOT}/chorus/${PROJECT_VERSION}.lua\")
  message(STATUS \"Installing: \${_file}\")
  configure_file(\"${PROJECT_BINARY_DIR}/chorus.lua.in\" \"\${_file}\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${_file}\")")
