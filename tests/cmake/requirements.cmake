# cmake/ChorusRequirements.cmake: what a too-old version is told, and the minimums that
# docs/install.md lists are the ones configure checks.
#   cmake -DCHORUS_SOURCE_DIR=<repo> -P requirements.cmake
cmake_minimum_required(VERSION 3.24)
include(${CHORUS_SOURCE_DIR}/cmake/ChorusRequirements.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)

chorus_version_problem(text "GCC" 9.3.0 ${CHORUS_MIN_GCC} "Load gcc/11.")
expect(text "Chorus needs GCC 11 or newer, found 9.3.0. Load gcc/11.")
chorus_version_problem(text "NCCL" 2.8.4 ${CHORUS_MIN_NCCL} "Load nccl.")
expect(text "Chorus needs NCCL 2.14 or newer, found 2.8.4. Load nccl.")
foreach(ok IN ITEMS 11 11.0 12.2.0)
  chorus_version_problem(text "GCC" ${ok} ${CHORUS_MIN_GCC} "")
  expect(text "")
endforeach()
chorus_version_problem(text "NCCL" 2.14.3 ${CHORUS_MIN_NCCL} "")
expect(text "")
chorus_version_problem(text "CUDA" "" ${CHORUS_MIN_CUDA} "")  # unread: no problem
expect(text "")
# The fusion kernels' 32 KiB of parameters need nvcc 12.1: an 11.8 toolkit is told so.
chorus_version_problem(text "CUDA" 11.8 ${CHORUS_MIN_CUDA} "${CHORUS_MIN_CUDA_REASON}.")
expect_match(text "^Chorus needs CUDA 12.1 or newer, found 11.8. .*__grid_constant__.*12.1")
foreach(ok IN ITEMS 12.1 12.4.131 13.0)
  chorus_version_problem(text "CUDA" ${ok} ${CHORUS_MIN_CUDA} "")
  expect(text "")
endforeach()

# The table of docs/install.md: each row's "oldest accepted" cell names the minimum.
file(READ ${CHORUS_SOURCE_DIR}/docs/install.md doc)
foreach(row IN ITEMS "C++ compiler|GCC ${CHORUS_MIN_GCC}, Clang ${CHORUS_MIN_CLANG}"
                     "MPI|MPI standard ${CHORUS_MIN_MPI_STANDARD}; Open MPI ${CHORUS_MIN_OPEN_MPI}"
                     "hwloc|${CHORUS_MIN_HWLOC}"
                     "CUDA (optional)|${CHORUS_MIN_CUDA}"
                     "NCCL (optional)|${CHORUS_MIN_NCCL}"
                     "LibTorch / torch (optional)|${CHORUS_MIN_TORCH}, C++11 ABI"
                     "Python (optional)|${CHORUS_MIN_PYTHON}")
  string(REPLACE "|" " | " cells "${row}")
  set(cells "| ${cells} |")
  string(FIND "${doc}" "${cells}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "docs/install.md has no row '${cells}'")
  endif()
endforeach()
