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
# What a static link of libgrouplin.a needs besides the archive (Libs.private): OpenBLAS, MPI
# when built in, cudart + cublasLt + the C++ runtime (the nvcc-compiled objects use static
# guards and unwinding) when CUDA is built in, then libm and pthreads.  A library CMake found as
# a file becomes -L<dir> -l<name>, the -L left out for the compiler's own link directories.
set(GLN_PC_LIBS_PRIVATE "")
set(gln_pc_dirs "")
function(gln_pc_add item)
  if(IS_ABSOLUTE "${item}" AND item MATCHES "/lib([^/]+)\\.(so|a|dylib)(\\.[0-9.]+)?$")
    set(name ${CMAKE_MATCH_1})
    get_filename_component(dir "${item}" DIRECTORY)
    if(NOT dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES AND NOT dir IN_LIST gln_pc_dirs)
      string(APPEND GLN_PC_LIBS_PRIVATE " -L${dir}")
      list(APPEND gln_pc_dirs "${dir}")
    endif()
    string(APPEND GLN_PC_LIBS_PRIVATE " -l${name}")
  else()
    string(APPEND GLN_PC_LIBS_PRIVATE " ${item}")
  endif()
  set(GLN_PC_LIBS_PRIVATE "${GLN_PC_LIBS_PRIVATE}" PARENT_SCOPE)
  set(gln_pc_dirs "${gln_pc_dirs}" PARENT_SCOPE)
endfunction()
foreach(lib ${BLAS_LIBRARIES})
  gln_pc_add("${lib}")
endforeach()
if(GLN_HAVE_MPI)
  foreach(lib ${MPI_C_LIBRARIES})
    gln_pc_add("${lib}")
  endforeach()
endif()
if(GLN_HAVE_CUDA)
  foreach(lib cublasLt cudart)
    get_target_property(gln_loc CUDA::${lib} IMPORTED_LOCATION)
    if(gln_loc)
      gln_pc_add("${gln_loc}")
    else()
      gln_pc_add("-L${CUDAToolkit_LIBRARY_DIR} -l${lib}")
    endif()
  endforeach()
  gln_pc_add(-lstdc++)
endif()
gln_pc_add(-lm)
gln_pc_add(-lpthread)
string(STRIP "${GLN_PC_LIBS_PRIVATE}" GLN_PC_LIBS_PRIVATE)
configure_file(${PROJECT_SOURCE_DIR}/cmake/grouplin.pc.in ${PROJECT_BINARY_DIR}/grouplin.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/grouplin.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
