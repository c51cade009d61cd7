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
  chorus_require("CUDA" "${CHORUS_CUDA_VERSION}" ${CHORUS_MIN_CUDA}
                 "${CMAKE_CUDA_COMPILER} (from ${CHORUS_NVCC_SOURCE}) is too old: \
${CHORUS_MIN_CUDA_REASON}. `module load cuda` of a newer toolkit (12.x still compiles for V100s), \
or configure with -DCHORUS_WITH_CUDA=OFF for host memory only.")
  chorus_choose_cuda_architectures(_chorus_archs _chorus_why "${CHORUS_CUDA_VERSION}"
                                   "${CMAKE_CUDA_ARCHITECTURES}" "${CHORUS_CUDA_ARCHS_DEFAULT}")
  if(NOT _chorus_why STREQUAL "CMAKE_CUDA_ARCHITECTURES given")
    set(CMAKE_CUDA_ARCHITECTURES "${_chorus_archs}" CACHE STRING "CUDA targets" FORCE)
    set(CHORUS_CUDA_ARCHS_DEFAULT "${_chorus_archs}" CACHE INTERNAL "the default last chosen")
  endif()
  list(JOIN CMAKE_CUDA_ARCHITECTURES " " _chorus_archs)
  chorus_summary_row(CUDA yes "${CHORUS_CUDA_VERSION}"
                     "${CMAKE_CUDA_COMPILER} (from ${CHORUS_NVCC_SOURCE}); GPUs ${_chorus_archs} (${_chorus_why})")
elseif(CMAKE_CUDA_COMPILER)
  chorus_summary_row(CUDA no "" "CHORUS_WITH_CUDA=OFF (nvcc: ${CMAKE_CUDA_COMPILER})")
else()
  chorus_summary_row(CUDA no "" "no nvcc in CUDACXX, CUDAToolkit_ROOT, CUDA_HOME, PATH or /usr/local/cuda")
endif()

# `python -c` puts the working directory first on sys.path, where a folder named like the
# module (a build tree's torch/) would be imported instead; the probes take it out.
set(CHORUS_PYTHON_PROBE "import sys; sys.path = [p for p in sys.path if p not in ('', '.')]")

# chorus_find_python(VAR MODULE DOC): caches in VAR the first interpreter that imports
# MODULE, of Python_EXECUTABLE, python3 on PATH and /usr/bin/python3; VAR already set: kept.
function(chorus_find_python var module doc)
  if(DEFINED ${var})
    return()
  endif()
  find_program(_chorus_python_on_path python3 NO_CACHE)
  foreach(_py IN ITEMS ${Python_EXECUTABLE} ${_chorus_python_on_path} /usr/bin/python3)
    execute_process(COMMAND ${_py} -c "${CHORUS_PYTHON_PROBE}; import ${module}"
                    RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
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
# A Python given by the user (pip passes its own) that cannot import torch builds no module,
# and says why.
chorus_find_python(CHORUS_PYTHON_EXECUTABLE torch "Python whose torch chorus.torch is built for")
set(CHORUS_PYTHON_TORCH_VERSION "")
set(_chorus_python_why "no python3 that imports torch (Python_EXECUTABLE, PATH, /usr/bin/python3)")
if(CHORUS_PYTHON_EXECUTABLE)
  set(_code "${CHORUS_PYTHON_PROBE}\n")
  string(APPEND _code [[
import torch
print("%d.%d" % sys.version_info[:2])
print(torch.__version__)
print(torch.utils.cmake_prefix_path)
print(int(torch.compiled_with_cxx11_abi()))
print(torch.version.cuda or "")]])
  execute_process(COMMAND ${CHORUS_PYTHON_EXECUTABLE} -c "${_code}"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_STRIP_TRAILING_WHITESPACE)
  if(_rc EQUAL 0)
    string(REPLACE "\n" ";" _out "${_out}")
    list(GET _out 0 _chorus_python_version)
    list(GET _out 1 CHORUS_PYTHON_TORCH_VERSION)
    list(GET _out 2 _chorus_py_torch_prefix)
    list(GET _out 3 _chorus_py_torch_abi)
    list(LENGTH _out _n)
    set(_chorus_py_torch_cuda "")
    if(_n GREATER 4)
      list(GET _out 4 _chorus_py_torch_cuda)
    endif()
    chorus_require("Python" "${_chorus_python_version}" ${CHORUS_MIN_PYTHON}
                   "${CHORUS_PYTHON_EXECUTABLE} is too old: load a newer Python module and make the venv with it.")
    if(NOT DEFINED Torch_DIR AND EXISTS "${_chorus_py_torch_prefix}/Torch/TorchConfig.cmake")
      list(APPEND CMAKE_PREFIX_PATH "${_chorus_py_torch_prefix}")
    endif()
  else()
    string(REGEX REPLACE ".*\n" "" _err "${_err}")  # the exception's last line
    set(_chorus_python_why "${CHORUS_PYTHON_EXECUTABLE} cannot import torch (${_err}): install torch \
in that environment, or activate the venv that has it")
    if(CHORUS_WITH_PYTHON)
      message(FATAL_ERROR "Chorus: CHORUS_WITH_PYTHON=ON but ${_chorus_python_why}.")
    endif()
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
set(CHORUS_NCCL_VERSION "${_chorus_nccl_VERSION}")
chorus_version_problem(_chorus_nccl_old "NCCL" "${_chorus_nccl_VERSION}" ${CHORUS_MIN_NCCL}
                       "`module load nccl` of a newer one, or set NCCL_HOME to it.")
if(_chorus_nccl_FOUND AND _chorus_nccl_old)
  set(_chorus_nccl_FOUND FALSE)
  set(_chorus_nccl_REPORT "${_chorus_nccl_LIBRARY}: ${_chorus_nccl_old}")
  list(APPEND _chorus_nccl_WARNINGS "${_chorus_nccl_REPORT}")
endif()
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
if(CHORUS_WITH_NCCL)
  chorus_summary_row(NCCL yes "${_chorus_nccl_VERSION}" "${CHORUS_NCCL_LIBRARY} (from ${_chorus_nccl_SOURCE})")
elseif(_chorus_nccl_FOUND)
  chorus_summary_row(NCCL no "${_chorus_nccl_VERSION}" "CHORUS_WITH_NCCL=OFF; found ${CHORUS_NCCL_LIBRARY}")
elseif(NOT CHORUS_WITH_CUDA)
  chorus_summary_row(NCCL no "" "no CUDA")
else()
  chorus_summary_row(NCCL no "" "${_chorus_nccl_REPORT}")
endif()

# Gloo (Debian's libgloo-dev): the transport of a world without an MPI launcher
# (src/collectives/gloo/), optional like NCCL.
find_package(Gloo CONFIG QUIET)
set(_chorus_gloo_found OFF)
if(Gloo_FOUND AND TARGET gloo)
  set(_chorus_gloo_found ON)
endif()
option(CHORUS_WITH_GLOO "Compile the Gloo transport" ${_chorus_gloo_found})
if(CHORUS_WITH_GLOO AND NOT _chorus_gloo_found)
  message(FATAL_ERROR "Chorus: CHORUS_WITH_GLOO=ON but no Gloo was found (libgloo-dev, or Gloo_DIR)")
endif()
if(CHORUS_WITH_GLOO)
  get_target_property(_chorus_gloo_where gloo IMPORTED_LOCATION_RELWITHDEBINFO)
  chorus_summary_row(Gloo yes "${Gloo_VERSION}" "${_chorus_gloo_where}")
elseif(_chorus_gloo_found)
  chorus_summary_row(Gloo no "${Gloo_VERSION}" "CHORUS_WITH_GLOO=OFF")
else()
  chorus_summary_row(Gloo no "" "not found (libgloo-dev, or Gloo_DIR)")
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
# A LibTorch Chorus cannot link: too old, or built with the pre-C++11 std::string
# (_GLIBCXX_USE_CXX11_ABI=0, as pip wheels before torch 2.7 were), which Chorus's own API
# and its spdlog do not use, so every call between them would fail to link.
set(_chorus_torch_why "no LibTorch found (Torch_DIR, CMAKE_PREFIX_PATH, or the torch of a python3)")
set(_chorus_torch_usable ${Torch_FOUND})
if(Torch_FOUND)
  chorus_version_problem(_chorus_torch_why "LibTorch" "${Torch_VERSION}" ${CHORUS_MIN_TORCH}
                         "Install a newer torch, or set Torch_DIR to a newer LibTorch.")
  if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
    set(_chorus_torch_why "LibTorch at ${Torch_DIR} uses the old C++ ABI (_GLIBCXX_USE_CXX11_ABI=0), \
which Chorus cannot link: use a torch built with the C++11 ABI (pip wheels of torch 2.7 or \
newer, or LibTorch's cxx11-abi download)")
  endif()
  if(_chorus_torch_why)
    set(_chorus_torch_usable FALSE)
    message(WARNING "Chorus: ${_chorus_torch_why}")
  endif()
endif()
option(CHORUS_WITH_TORCH "Build the LibTorch adapter (Chorus::torch)" ${_chorus_torch_usable})
if(CHORUS_WITH_TORCH AND NOT _chorus_torch_usable)
  message(FATAL_ERROR "Chorus: CHORUS_WITH_TORCH=ON but ${_chorus_torch_why}")
endif()
# Whether that LibTorch has CUDA (pip wheels built for CUDA do; Debian's is CPU-only yet
# ships the c10/cuda headers, so a header test alone cannot tell): its Caffe2 config sets
# CAFFE2_USE_CUDA and exports c10_cuda only then. Chorus::torch then orders Chorus's reads of
# a CUDA tensor after torch's current stream (src/torch/convert.cc).
set(CHORUS_TORCH_CUDA OFF)
if(Torch_FOUND AND (CAFFE2_USE_CUDA OR TARGET c10_cuda))
  set(CHORUS_TORCH_CUDA ON)
endif()
# Whether that LibTorch has torch.distributed's C++ side (c10d), which the `chorus` process
# group (src/torch/process_group.cc) implements; a torch built without distributed has not.
set(CHORUS_TORCH_C10D OFF)
if(CHORUS_WITH_TORCH)
  find_path(CHORUS_C10D_INCLUDE_DIR torch/csrc/distributed/c10d/Work.hpp
            PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
  if(CHORUS_C10D_INCLUDE_DIR)
    set(CHORUS_TORCH_C10D ON)
  endif()
endif()
if(CHORUS_WITH_TORCH)
  set(_where "${Torch_DIR}, CPU only")
  if(CHORUS_TORCH_CUDA)
    set(_where "${Torch_DIR}, with CUDA")
  endif()
  if(CHORUS_TORCH_C10D)
    string(APPEND _where ", c10d: the chorus process group")
  else()
    string(APPEND _where ", without c10d: no chorus process group")
  endif()
  chorus_summary_row(LibTorch yes "${Torch_VERSION}" "${_where}")
elseif(_chorus_torch_usable)
  chorus_summary_row(LibTorch no "${Torch_VERSION}" "CHORUS_WITH_TORCH=OFF; found ${Torch_DIR}")
else()
  chorus_summary_row(LibTorch no "${Torch_VERSION}" "${_chorus_torch_why}")
endif()
# A torch built for another CUDA than the toolkit Chorus compiles with puts two CUDA runtimes
# in one process; it may work, but it is the first thing to suspect.
string(REGEX MATCH "^[0-9]+" _chorus_torch_cuda_major "${_chorus_py_torch_cuda}")
string(REGEX MATCH "^[0-9]+" _chorus_cuda_major "${CHORUS_CUDA_VERSION}")
if(CHORUS_WITH_CUDA AND _chorus_torch_cuda_major AND NOT _chorus_torch_cuda_major STREQUAL _chorus_cuda_major)
  message(WARNING "Chorus: ${CHORUS_PYTHON_EXECUTABLE}'s torch is built for CUDA ${_chorus_py_torch_cuda}, "
                  "Chorus compiles with CUDA ${CHORUS_CUDA_VERSION} (${CMAKE_CUDA_COMPILER}): load the "
                  "CUDA module of torch's version")
endif()

set(_chorus_python_default OFF)
if(CHORUS_PYTHON_TORCH_VERSION AND NOT CHORUS_WITH_TORCH)
  set(_chorus_python_why "no LibTorch adapter (see LibTorch)")
elseif(CHORUS_PYTHON_TORCH_VERSION)
  # FindPython's `Python`, not `Python3`: pybind11 takes `Python` whenever it is found, and
  # a pip LibTorch's config has already found it with the interpreter alone, which leaves
  # pybind11 without Python_add_library. Asking again with the headers completes it.
  set(Python_EXECUTABLE ${CHORUS_PYTHON_EXECUTABLE})
  find_package(Python QUIET COMPONENTS Interpreter Development.Module)
  set(PYBIND11_FINDPYTHON ON)
  find_package(pybind11 CONFIG QUIET)
  if(NOT pybind11_FOUND)
    # pybind11 from pip (a venv): its CMake files live inside the package.
    execute_process(COMMAND ${CHORUS_PYTHON_EXECUTABLE} -c
                            "${CHORUS_PYTHON_PROBE}; import pybind11; print(pybind11.get_cmake_dir())"
                    OUTPUT_VARIABLE _chorus_pybind11_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_chorus_pybind11_dir)
      find_package(pybind11 CONFIG QUIET HINTS ${_chorus_pybind11_dir})
    endif()
  endif()
  string(REGEX MATCH "^[0-9]+[.][0-9]+" _chorus_py_torch_mm "${CHORUS_PYTHON_TORCH_VERSION}")
  string(REGEX MATCH "^[0-9]+[.][0-9]+" _chorus_torch_mm "${Torch_VERSION}")
  if(NOT _chorus_py_torch_mm STREQUAL _chorus_torch_mm)
    set(_chorus_python_why "LibTorch ${Torch_VERSION} differs from the torch ${CHORUS_PYTHON_TORCH_VERSION} \
of ${CHORUS_PYTHON_EXECUTABLE} (configure with -DTorch_DIR=<that torch's cmake_prefix_path>/Torch)")
  elseif(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=([01])" AND NOT CMAKE_MATCH_1 STREQUAL _chorus_py_torch_abi)
    set(_chorus_python_why "LibTorch at ${Torch_DIR} and the torch of ${CHORUS_PYTHON_EXECUTABLE} differ \
in C++ ABI (_GLIBCXX_USE_CXX11_ABI ${CMAKE_MATCH_1} and ${_chorus_py_torch_abi})")
  elseif(Python_FOUND AND Python_Development.Module_FOUND AND pybind11_FOUND)
    set(_chorus_python_default ON)
  else()
    set(_chorus_python_why "Python's headers found: ${Python_Development.Module_FOUND}, pybind11 \
found: ${pybind11_FOUND} (python3-dev and pybind11-dev, or pip install pybind11)")
  endif()
endif()
option(CHORUS_WITH_PYTHON "Build the Python package chorus.torch (pybind11)" ${_chorus_python_default})
if(CHORUS_WITH_PYTHON)
  chorus_summary_row("chorus.torch" yes "${CHORUS_PYTHON_TORCH_VERSION}"
                     "for the torch of ${CHORUS_PYTHON_EXECUTABLE}")
elseif(_chorus_python_default)
  chorus_summary_row("chorus.torch" no "" "CHORUS_WITH_PYTHON=OFF")
else()
  chorus_summary_row("chorus.torch" no "" "${_chorus_python_why}")
endif()

if(CHORUS_WITH_CUDA)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
if(CHORUS_WITH_NCCL AND NOT CHORUS_WITH_CUDA)
  message(FATAL_ERROR "CHORUS_WITH_NCCL=ON needs CHORUS_WITH_CUDA=ON")
endif()

foreach(_part IN ITEMS TESTS BENCH EXAMPLES)
  string(TOLOWER "${_part}" _name)
  set(_state no)
  if(CHORUS_BUILD_${_part})
    set(_state yes)
  endif()
  chorus_summary_row("${_name}" ${_state} "" "CHORUS_BUILD_${_part}=${CHORUS_BUILD_${_part}}")
endforeach()
