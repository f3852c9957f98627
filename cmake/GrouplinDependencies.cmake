# Third-party dependencies: OpenBLAS (required), MPI (optional), CUDA toolkit (optional).

# OpenBLAS through CMake's FindBLAS; the CPU backend calls the Fortran sgemm_ symbol, so no
# particular cblas header layout is assumed (Debian and Ubuntu install them differently).
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)

find_package(Threads REQUIRED)

find_library(GLN_LIBM m)

# MPI
set(GLN_HAVE_MPI OFF)
if(NOT GLN_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C)
  if(MPI_C_FOUND)
    set(GLN_HAVE_MPI ON)
  elseif(GLN_MPI STREQUAL "ON")
    message(FATAL_ERROR "GLN_MPI=ON but no MPI was found (apt-get install libopenmpi-dev)")
  endif()
endif()

# CUDA
set(GLN_HAVE_CUDA OFF)
if(NOT GLN_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Hopper with its architecture-specific instructions (wgmma, setmaxnreg).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90a)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(GLN_HAVE_CUDA ON)
  elseif(GLN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "GLN_CUDA=ON but no CUDA compiler was found")
  endif()
endif()

# NCCL (the GPU communicator): nccl.h and libnccl ship with the CUDA toolkit here, or come
# from the libnccl-dev package (/usr/include, /usr/lib/<arch>).
set(GLN_HAVE_NCCL OFF)
if(GLN_HAVE_CUDA AND NOT GLN_NCCL STREQUAL "OFF")
  find_path(GLN_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(GLN_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(GLN_NCCL_INCLUDE_DIR AND GLN_NCCL_LIBRARY)
    set(GLN_HAVE_NCCL ON)
  elseif(GLN_NCCL STREQUAL "ON")
    message(FATAL_ERROR "GLN_NCCL=ON but nccl.h / libnccl were not found (install libnccl-dev)")
  endif()
elseif(GLN_NCCL STREQUAL "ON")
  message(FATAL_ERROR "GLN_NCCL=ON needs the CUDA backend (GLN_CUDA)")
endif()

# CUTLASS (header-only) for the Hopper grouped GEMMs: the nvidia-cutlass wheel that
# scripts/deps.sh installs into .venv ships its headers under cutlass_library/source/include.
set(GLN_HAVE_CUTLASS OFF)
if(GLN_HAVE_CUDA AND NOT GLN_CUTLASS STREQUAL "OFF")
  if(NOT GLN_CUTLASS_DIR)
    file(GLOB gln_cutlass_candidates
         ${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages/cutlass_library/source/include)
    if(gln_cutlass_candidates)
      list(GET gln_cutlass_candidates 0 gln_cutlass_found)
      set(GLN_CUTLASS_DIR ${gln_cutlass_found} CACHE PATH "CUTLASS include directory" FORCE)
    endif()
  endif()
  if(GLN_CUTLASS_DIR AND EXISTS ${GLN_CUTLASS_DIR}/cutlass/gemm/device/gemm_universal_adapter.h)
    set(GLN_HAVE_CUTLASS ON)
  elseif(GLN_CUTLASS STREQUAL "ON")
    message(FATAL_ERROR "GLN_CUTLASS=ON but no CUTLASS headers were found (run scripts/deps.sh, "
                        "or pass -DGLN_CUTLASS_DIR=<dir holding cutlass/ and cute/>)")
  endif()
endif()

# Everything the library links against (used by the library, the tests and the tools).
set(GLN_LINK_LIBS ${BLAS_LIBRARIES} Threads::Threads)
if(GLN_LIBM)
  list(APPEND GLN_LINK_LIBS ${GLN_LIBM})
endif()
if(GLN_HAVE_MPI)
  list(APPEND GLN_LINK_LIBS MPI::MPI_C)
endif()
if(GLN_HAVE_CUDA)
  list(APPEND GLN_LINK_LIBS CUDA::cudart CUDA::cublasLt)
endif()
if(GLN_HAVE_NCCL)
  list(APPEND GLN_LINK_LIBS ${GLN_NCCL_LIBRARY})
endif()
