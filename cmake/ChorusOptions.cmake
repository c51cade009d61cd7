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

# chorus_find_python(VAR MODULE DOC): caches in VAR the first interpreter that imports
# MODULE, of Python_EXECUTABLE, python3 on PATH and /usr/bin/python3; VAR already set: kept.
function(chorus_find_python var module doc)
  if(DEFINED ${var})
    return()
  endif()
  find_program(_chorus_python_on_path python3 NO_CACHE)
  foreach(_py IN ITEMS ${Python_EXECUTABLE} ${_chorus_python_on_path} /usr/bin/python3)
    execute_process(COMMAND ${_py} -c "import ${module}" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc EQUAL 0)
      set(${var} ${_py} CACHE FILEPATH "${doc}")
      return()
    endif()
  endforeach()
endfunction()

# Python (chorus.torch): the first interpreter that imports torch. When its torch ships
# LibTorch's CMake files (pip wheels do; Debian's splits them into libtorch-dev), that
# LibTorch is the one found below, so that Chorus::torch and the Python module link the torch
# that Python imports.
chorus_find_python(CHORUS_PYTHON_EXECUTABLE torch "Python whose torch chorus.torch is built for")
if(CHORUS_PYTHON_EXECUTABLE)
  execute_process(COMMAND ${CHORUS_PYTHON_EXECUTABLE} -c
                          "import torch; print(torch.__version__); print(torch.utils.cmake_prefix_path)"
                  OUTPUT_VARIABLE _out OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  string(REPLACE "\n" ";" _out "${_out}")
  list(GET _out 0 CHORUS_PYTHON_TORCH_VERSION)
  list(GET _out 1 _chorus_py_torch_prefix)
  if(NOT DEFINED Torch_DIR AND EXISTS "${_chorus_py_torch_prefix}/Torch/TorchConfig.cmake")
    list(APPEND CMAKE_PREFIX_PATH "${_chorus_py_torch_prefix}")
  endif()
endif()

# LibTorch's CUDA setup may set CMAKE_CUDA_ARCHITECTURES in this scope (to OFF, for its own
# flags); Chorus's kernels keep the targets chosen before it.
if(DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(_chorus_cuda_archs "${CMAKE_CUDA_ARCHITECTURES}")
endif()
find_package(Torch QUIET)
if(DEFINED _chorus_cuda_archs)
  set(CMAKE_CUDA_ARCHITECTURES "${_chorus_cuda_archs}")
else()
  unset(CMAKE_CUDA_ARCHITECTURES)
endif()
option(CHORUS_WITH_TORCH "Build the LibTorch adapter (Chorus::torch)" ${Torch_FOUND})
# Whether that LibTorch has CUDA (pip wheels built for CUDA do; Debian's is CPU-only yet
# ships the c10/cuda headers, so a header test alone cannot tell): its Caffe2 config sets
# CAFFE2_USE_CUDA and exports c10_cuda only then. Chorus::torch then orders Chorus's reads of
# a CUDA tensor after torch's current stream (src/torch/convert.cc).
set(CHORUS_TORCH_CUDA OFF)
if(Torch_FOUND AND (CAFFE2_USE_CUDA OR TARGET c10_cuda))
  set(CHORUS_TORCH_CUDA ON)
endif()

set(_chorus_python_default OFF)
if(CHORUS_PYTHON_EXECUTABLE AND Torch_FOUND)
  # FindPython's `Python`, not `Python3`: pybind11 takes `Python` whenever it is found, and
  # a pip LibTorch's config has already found it with the interpreter alone, which leaves
  # pybind11 without Python_add_library. Asking again with the headers completes it.
  set(Python_EXECUTABLE ${CHORUS_PYTHON_EXECUTABLE})
  find_package(Python QUIET COMPONENTS Interpreter Development.Module)
  set(PYBIND11_FINDPYTHON ON)
  find_package(pybind11 CONFIG QUIET)
  if(NOT pybind11_FOUND)
    # pybind11 from pip (a venv): its CMake files live inside the package.
    execute_process(COMMAND ${CHORUS_PYTHON_EXECUTABLE} -c "import pybind11; print(pybind11.get_cmake_dir())"
                    OUTPUT_VARIABLE _chorus_pybind11_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_chorus_pybind11_dir)
      find_package(pybind11 CONFIG QUIET HINTS ${_chorus_pybind11_dir})
    endif()
  endif()
  string(REGEX MATCH "^[0-9]+[.][0-9]+" _chorus_py_torch_mm "${CHORUS_PYTHON_TORCH_VERSION}")
  string(REGEX MATCH "^[0-9]+[.][0-9]+" _chorus_torch_mm "${Torch_VERSION}")
  if(NOT _chorus_py_torch_mm STREQUAL _chorus_torch_mm)
    message(STATUS "Chorus: LibTorch ${Torch_VERSION} differs from the torch "
                   "${CHORUS_PYTHON_TORCH_VERSION} of ${CHORUS_PYTHON_EXECUTABLE}: no Python module "
                   "(configure with -DTorch_DIR=<that torch's cmake_prefix_path>/Torch)")
  elseif(Python_FOUND AND Python_Development.Module_FOUND AND pybind11_FOUND)
    set(_chorus_python_default ON)
  else()
    message(STATUS "Chorus: no Python module: Python's headers found: ${Python_Development.Module_FOUND}, "
                   "pybind11 found: ${pybind11_FOUND}")
  endif()
endif()
option(CHORUS_WITH_PYTHON "Build the Python package chorus.torch (pybind11)" ${_chorus_python_default})
message(STATUS "Chorus: CHORUS_WITH_PYTHON=${CHORUS_WITH_PYTHON} (python: ${CHORUS_PYTHON_EXECUTABLE}, "
               "torch ${CHORUS_PYTHON_TORCH_VERSION})")

if(CHORUS_WITH_CUDA)
  # Turing (the oldest target CUDA 13 accepts), Ampere, Hopper, plus PTX for what comes next.
  # Set before enable_language(CUDA), which otherwise caches nvcc's own default (sm_75 only).
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 75 80 90-real 90-virtual CACHE STRING "CUDA targets")
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
if(CHORUS_WITH_NCCL AND NOT CHORUS_WITH_CUDA)
  message(FATAL_ERROR "CHORUS_WITH_NCCL=ON needs CHORUS_WITH_CUDA=ON")
endif()

message(STATUS "Chorus ${PROJECT_VERSION}: CHORUS_WITH_CUDA=${CHORUS_WITH_CUDA} "
               "CHORUS_WITH_NCCL=${CHORUS_WITH_NCCL} CHORUS_WITH_TORCH=${CHORUS_WITH_TORCH} "
               "(LibTorch with CUDA: ${CHORUS_TORCH_CUDA})")
message(STATUS "Chorus: tests=${CHORUS_BUILD_TESTS} bench=${CHORUS_BUILD_BENCH} "
               "examples=${CHORUS_BUILD_EXAMPLES}")
