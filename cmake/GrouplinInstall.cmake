# Install rules: library, header, CMake package config (find_package(grouplin)), pkg-config.
include(CMakePackageConfigHelpers)

install(TARGETS grouplin grouplin_static EXPORT grouplinTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/grouplin.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT grouplinTargets NAMESPACE grouplin:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/grouplin)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/grouplinConfig.cmake.in
  ${PROJECT_BINARY_DIR}/grouplinConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/grouplin)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/grouplinConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/grouplinConfig.cmake ${PROJECT_BINARY_DIR}/grouplinConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/grouplin)

# Relocatable: the prefix is found from the .pc file's own place (cmake --install --prefix X).
file(RELATIVE_PATH GLN_PC_PREFIX_REL ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" GLN_PC_PREFIX_REL "${GLN_PC_PREFIX_REL}")
# What a static link needs beside libgrouplin.a: BLAS, then MPI and CUDA when built in.
set(GLN_PC_LIBS_PRIVATE "")
foreach(lib ${BLAS_LIBRARIES})
  string(APPEND GLN_PC_LIBS_PRIVATE " ${lib}")
endforeach()
if(GLN_HAVE_MPI)
  foreach(lib ${MPI_C_LIBRARIES})
    string(APPEND GLN_PC_LIBS_PRIVATE " ${lib}")
  endforeach()
endif()
if(GLN_HAVE_CUDA)
  string(APPEND GLN_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcublasLt -lcudart -lstdc++")
endif()
string(APPEND GLN_PC_LIBS_PRIVATE " -lm -lpthread")
string(STRIP "${GLN_PC_LIBS_PRIVATE}" GLN_PC_LIBS_PRIVATE)
configure_file(${PROJECT_SOURCE_DIR}/cmake/grouplin.pc.in ${PROJECT_BINARY_DIR}/grouplin.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/grouplin.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
