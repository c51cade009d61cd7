# Build options. Each optional dependency defaults to ON when it is found, and configure
# prints what was chosen so a user sees at once which paths are compiled in.
include(CheckLanguage)

option(CHORUS_BUILD_TESTS "Build the test suite" ${CHORUS_TOP_LEVEL})
option(CHORUS_BUILD_BENCH "Build the benchmarks" ${CHORUS_TOP_LEVEL})
option(CHORUS_BUILD_EXAMPLES "Build the examples" ${CHORUS_TOP_LEVEL})

# CUDA: the toolkit the user's environment points to (cmake/ChorusCuda.cmake says in which
# order), unless CMAKE_CUDA_COMPILER is given. The source is kept for later configures, when
# CMAKE_CUDA_COMPILER is already cached.
include(ChorusCuda)
if(NOT DEFINED CMAKE_CUDA_COMPILER)
  chorus_pick_nvcc(_chorus_nvcc _chorus_nvcc_source _chorus_warnings FALLBACK /usr/local/cuda)
  foreach(_text IN LISTS _chorus_warnings)
    message(WARNING "Chorus: ${_text}")
  endforeach()
  if(_chorus_nvcc)
    set(CMAKE_CUDA_COMPILER "${_chorus_nvcc}" CACHE FILEPATH "CUDA compiler")
    set(CHORUS_NVCC_PICKED "${_chorus_nvcc}" CACHE INTERNAL "the nvcc Chorus picked")
    set(CHORUS_NVCC_SOURCE "${_chorus_nvcc_source}" CACHE INTERNAL "where it came from")
  endif()
elseif(NOT CMAKE_CUDA_COMPILER STREQUAL "${CHORUS_NVCC_PICKED}")
  set(CHORUS_NVCC_SOURCE "CMAKE_CUDA_COMPILER given" CACHE INTERNAL "where it came from")
endif()
check_language(CUDA)
if(CMAKE_CUDA_COMPILER AND NOT CHORUS_NVCC_SOURCE)
  set(CHORUS_NVCC_SOURCE "CMake's own search" CACHE INTERNAL "where it came from")
endif()
set(_chorus_cuda_default OFF)
if(CMAKE_CUDA_COMPILER)
  set(_chorus_cuda_default ON)
endif()
option(CHORUS_WITH_CUDA "Compile the CUDA paths (device tensors, fusion kernels)" ${_chorus_cuda_default})

# The GPUs to compile for, by the toolkit's version (CUDA 13 has no Volta), unless given. Set
# before enable_language(CUDA), which otherwise caches nvcc's own default (sm_75 alone), and
# before find_package(Torch), so that the block around it keeps this list.
if(CHORUS_WITH_CUDA)
  set(CHORUS_CUDA_VERSION "${CMAKE_CUDA_COMPILER_VERSION}")
  if(NOT CHORUS_CUDA_VERSION)
    chorus_nvcc_version(CHORUS_CUDA_VERSION "${CMAKE_CUDA_COMPILER}")
  endif()
  message(STATUS "Chorus: nvcc ${CMAKE_CUDA_COMPILER}, CUDA ${CHORUS_CUDA_VERSION} "
                 "(from ${CHORUS_NVCC_SOURCE})")
  chorus_choose_cuda_architectures(_chorus_archs _chorus_why "${CHORUS_CUDA_VERSION}"
                                   "${CMAKE_CUDA_ARCHITECTURES}" "${CHORUS_CUDA_ARCHS_DEFAULT}")
  if(NOT _chorus_why STREQUAL "CMAKE_CUDA_ARCHITECTURES given")
    set(CMAKE_CUDA_ARCHITECTURES "${_chorus_archs}" CACHE STRING "CUDA targets" FORCE)
    set(CHORUS_CUDA_ARCHS_DEFAULT "${_chorus_archs}" CACHE INTERNAL "the default last chosen")
  endif()
  list(JOIN CMAKE_CUDA_ARCHITECTURES " " _chorus_archs)
  message(STATUS "Chorus: CUDA architectures ${_chorus_archs} (${_chorus_why})")
endif()

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

# NCCL: cmake/ChorusFindNccl.cmake says where it is looked for (searched before LibTorch's
# config can leave NCCL variables of its own). CHORUS_NCCL_INCLUDE_DIR and
# CHORUS_NCCL_LIBRARY, when the user gives them (scripts/gpu-check.sh does), are taken as they
# are; when they hold what an earlier configure found, the search runs again, so that a changed
# NCCL_HOME is seen.
include(ChorusFindNccl)
set(_chorus_nccl_given "")
foreach(_part IN ITEMS INCLUDE_DIR LIBRARY)
  set(_value "${CHORUS_NCCL_${_part}}")
  if(_value AND NOT _value STREQUAL "${CHORUS_NCCL_FOUND_${_part}}")
    list(APPEND _chorus_nccl_given ${_part} "${_value}")
  endif()
endforeach()
set(_chorus_python "${CHORUS_PYTHON_EXECUTABLE}")
if(NOT _chorus_python)
  unset(_chorus_python)  # find_program does not search for a variable already set, even to ""
  find_program(_chorus_python python3 NO_CACHE)
endif()
# The toolkit is <root> of <root>/bin/nvcc; where that nvcc is a link from elsewhere
# (/usr/bin/nvcc to /opt/cuda/bin/nvcc), the root of the file it points to.
set(_chorus_toolkit /usr/local/cuda)
if(CMAKE_CUDA_COMPILER)
  cmake_path(GET CMAKE_CUDA_COMPILER PARENT_PATH _chorus_toolkit)
  cmake_path(GET _chorus_toolkit PARENT_PATH _chorus_toolkit)
  if(NOT EXISTS "${_chorus_toolkit}/include/cuda.h")
    file(REAL_PATH "${CMAKE_CUDA_COMPILER}" _chorus_toolkit)
    cmake_path(GET _chorus_toolkit PARENT_PATH _chorus_toolkit)
    cmake_path(GET _chorus_toolkit PARENT_PATH _chorus_toolkit)
  endif()
endif()
chorus_find_nccl(_chorus_nccl ${_chorus_nccl_given} PYTHON "${_chorus_python}"
                 TOOLKIT_ROOT "${_chorus_toolkit}" SYSTEM)
foreach(_text IN LISTS _chorus_nccl_WARNINGS)
  message(WARNING "Chorus: ${_text}")
endforeach()
foreach(_part IN ITEMS INCLUDE_DIR LIBRARY)
  if(NOT _part IN_LIST _chorus_nccl_given)
    set(_value "${_chorus_nccl_${_part}}")
    if(NOT _chorus_nccl_FOUND)
      set(_value "CHORUS_NCCL_${_part}-NOTFOUND")
    endif()
    set(_type PATH)
    if(_part STREQUAL "LIBRARY")
      set(_type FILEPATH)  # as find_library cached it before, for cmake-gui's file picker
    endif()
    set(CHORUS_NCCL_${_part} "${_value}" CACHE ${_type} "NCCL's header directory or library" FORCE)
    set(CHORUS_NCCL_FOUND_${_part} "${_value}" CACHE INTERNAL "what configure found")
  endif()
endforeach()
set(_chorus_nccl_default OFF)
if(CHORUS_WITH_CUDA AND _chorus_nccl_FOUND)
  set(_chorus_nccl_default ON)
endif()
option(CHORUS_WITH_NCCL "Compile the NCCL backend" ${_chorus_nccl_default})
if(CHORUS_WITH_NCCL AND NOT _chorus_nccl_FOUND)
  message(FATAL_ERROR "Chorus: CHORUS_WITH_NCCL=ON but ${_chorus_nccl_REPORT}")
endif()
message(STATUS "Chorus: ${_chorus_nccl_REPORT}")

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
