# Which CUDA toolkit Chorus builds with, and which GPU generations it compiles for. Functions
# of their arguments and the environment only, so they also run in script mode
# (tests/cmake/cuda_architectures.cmake); cmake/ChorusOptions.cmake caches what they choose.

# chorus_pick_nvcc(<path-var> <source-var> <warnings-var> FALLBACK <dir>): the nvcc the
# environment points to, first of: CUDACXX (CMake's own variable for it), CUDAToolkit_ROOT
# (CMake or environment variable), CUDA_HOME, nvcc on PATH, <dir>/bin/nvcc. The fallback
# (/usr/local/cuda) comes last because `module load cuda` on a cluster sets PATH and CUDA_HOME
# to its toolkit while /usr/local/cuda may hold another: taking it first would compile with one
# toolkit and link against the other. <source-var> says which of those gave it ("" when none
# did); a root without bin/nvcc adds a text to <warnings-var>.
function(chorus_pick_nvcc path_var source_var warnings_var)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "FALLBACK" "")
  set(warnings "")
  set(path "")
  set(source "")
  if(NOT "$ENV{CUDACXX}" STREQUAL "")
    set(path "$ENV{CUDACXX}")
    set(source "CUDACXX")
  endif()
  foreach(name IN ITEMS CUDAToolkit_ROOT CUDA_HOME)
    if(path)
      break()
    endif()
    set(root "$ENV{${name}}")
    if(${name})  # a CMake variable, unless empty or *-NOTFOUND
      set(root "${${name}}")
    endif()
    if(NOT root)
      continue()
    endif()
    if(EXISTS "${root}/bin/nvcc")
      set(path "${root}/bin/nvcc")
      set(source "${name}=${root}")
    else()
      list(APPEND warnings "${name}=${root} has no bin/nvcc, not used")
    endif()
  endforeach()
  if(NOT path)
    find_program(on_path nvcc NO_CACHE NO_DEFAULT_PATH PATHS ENV PATH)
    if(on_path)
      set(path "${on_path}")
      set(source "PATH")
    elseif(arg_FALLBACK AND EXISTS "${arg_FALLBACK}/bin/nvcc")
      set(path "${arg_FALLBACK}/bin/nvcc")
      set(source "${arg_FALLBACK}")
    endif()
  endif()
  set(${path_var} "${path}" PARENT_SCOPE)
  set(${source_var} "${source}" PARENT_SCOPE)
  set(${warnings_var} "${warnings}" PARENT_SCOPE)
endfunction()

# chorus_nvcc_version(<var> <nvcc>): the toolkit's major.minor from `nvcc --version` ("release
# 13.0, V13.0.88"), or "" when it does not run or says something else.
function(chorus_nvcc_version var nvcc)
  execute_process(COMMAND "${nvcc}" --version OUTPUT_VARIABLE out ERROR_QUIET TIMEOUT 60)
  set(version "")
  if(out MATCHES "release ([0-9]+[.][0-9]+)")
    set(version "${CMAKE_MATCH_1}")
  endif()
  set(${var} "${version}" PARENT_SCOPE)
endfunction()

# chorus_cuda_default_architectures(<var> <version>): the GPUs users run on that this toolkit
# can compile for: Volta (70, the V100s of many clusters; CUDA 13 dropped it), Turing (75),
# Ampere (80), Hopper (90), and PTX of the newest for GPUs that come later. Every toolkit
# configure accepts (CHORUS_MIN_CUDA, 12.1) compiles for Hopper. An unknown version ("") gets
# CUDA 13's list, which every 12.x toolkit accepts too.
function(chorus_cuda_default_architectures var version)
  if(version STREQUAL "" OR version VERSION_GREATER_EQUAL 13.0)
    set(archs 75 80 90-real 90-virtual)
  else()
    set(archs 70 75 80 90-real 90-virtual)
  endif()
  set(${var} "${archs}" PARENT_SCOPE)
endfunction()

# chorus_choose_cuda_architectures(<list-var> <why-var> <version> <current> <previous-default>):
# the list to build for and why. <current> is CMAKE_CUDA_ARCHITECTURES as configure found it
# ("" when unset); it wins unless it is the default an earlier configure of this build chose
# (<previous-default>), which is chosen again so that the message stays true.
function(chorus_choose_cuda_architectures list_var why_var version current previous_default)
  if(NOT current STREQUAL "" AND NOT current STREQUAL "${previous_default}")
    set(${list_var} "${current}" PARENT_SCOPE)
    set(${why_var} "CMAKE_CUDA_ARCHITECTURES given" PARENT_SCOPE)
    return()
  endif()
  chorus_cuda_default_architectures(archs "${version}")
  set(${list_var} "${archs}" PARENT_SCOPE)
  if(version STREQUAL "")
    set(${why_var} "default; nvcc did not say its CUDA version" PARENT_SCOPE)
  else()
    set(${why_var} "default for CUDA ${version}" PARENT_SCOPE)
  endif()
endfunction()
