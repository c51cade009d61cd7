# Build options. Each optional dependency defaults to ON when it is found, and configure
# prints what was chosen so a user sees at once which paths are compiled in.
include(CheckLanguage)

option(CHORUS_BUILD_TESTS "Build the test suite" ${CHORUS_TOP_LEVEL})
option(CHORUS_BUILD_BENCH "Build the benchmarks" ${CHORUS_TOP_LEVEL})
option(CHORUS_BUILD_EXAMPLES "Build the examples" ${CHORUS_TOP_LEVEL})

# CUDA: nvcc from CUDA 13 under /usr/local/cuda when present.
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)
set(_chorus_cuda_default OFF)
if(CMAKE_CUDA_COMPILER)
  set(_chorus_cuda_default ON)
endif()
option(CHORUS_WITH_CUDA "Compile the CUDA paths (device tensors, fusion kernels)" ${_chorus_cuda_default})

find_library(CHORUS_NCCL_LIBRARY nccl HINTS /usr/local/cuda/lib64 /usr/local/cuda/lib)
find_path(CHORUS_NCCL_INCLUDE_DIR nccl.h HINTS /usr/local/cuda/include)
set(_chorus_nccl_default OFF)
if(CHORUS_WITH_CUDA AND CHORUS_NCCL_LIBRARY AND CHORUS_NCCL_INCLUDE_DIR)
  set(_chorus_nccl_default ON)
endif()
option(CHORUS_WITH_NCCL "Compile the NCCL backend" ${_chorus_nccl_default})

find_package(Torch QUIET)
option(CHORUS_WITH_TORCH "Build the LibTorch adapter (Chorus::torch)" ${Torch_FOUND})

if(CHORUS_WITH_CUDA)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # Volta (ABCI V100), Ampere, Hopper, plus PTX for what comes next.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 70 80 90-real 90-virtual)
    if(CUDAToolkit_VERSION VERSION_GREATER_EQUAL 13)
      # CUDA 13 dropped Volta: the oldest target it accepts is Turing.
      set(CMAKE_CUDA_ARCHITECTURES 75 80 90-real 90-virtual)
    endif()
  endif()
endif()
if(CHORUS_WITH_NCCL AND NOT CHORUS_WITH_CUDA)
  message(FATAL_ERROR "CHORUS_WITH_NCCL=ON needs CHORUS_WITH_CUDA=ON")
endif()

message(STATUS "Chorus ${PROJECT_VERSION}: CHORUS_WITH_CUDA=${CHORUS_WITH_CUDA} "
               "CHORUS_WITH_NCCL=${CHORUS_WITH_NCCL} CHORUS_WITH_TORCH=${CHORUS_WITH_TORCH}")
message(STATUS "Chorus: tests=${CHORUS_BUILD_TESTS} bench=${CHORUS_BUILD_BENCH} "
               "examples=${CHORUS_BUILD_EXAMPLES}")
