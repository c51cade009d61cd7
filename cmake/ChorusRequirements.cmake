# The oldest versions Chorus builds with, checked where each dependency is found, so that an
# old module stops configure with what to load instead of failing later in the compiler or the
# linker. docs/install.md lists the same numbers; tests/cmake/requirements.cmake checks the
# function below.
set(CHORUS_MIN_GCC 11)         # C++20: std::bit_cast, <span>, designated initializers
set(CHORUS_MIN_CLANG 14)
set(CHORUS_MIN_PYTHON 3.9)
set(CHORUS_MIN_MPI_STANDARD 3.1)  # MPI_THREAD_MULTIPLE with non-blocking collectives
set(CHORUS_MIN_OPEN_MPI 4.0)
set(CHORUS_MIN_HWLOC 2.0)
set(CHORUS_MIN_CUDA 12.1)      # kernel parameters of up to 32764 bytes (src/kernels)
# Why, for the message that refuses an older toolkit (docs/install.md says the same).
set(CHORUS_MIN_CUDA_REASON "the fusion kernels take up to 32 KiB of parameters \
(__grid_constant__), which nvcc accepts from CUDA 12.1 (with a driver of 530 or newer)")
set(CHORUS_MIN_NCCL 2.14)      # non-blocking communicators, so that no wait is unbounded
set(CHORUS_MIN_TORCH 1.13)

# chorus_version_problem(<var> <what> <found> <minimum> <hint>): sets <var> to a message saying
# that <what> <found> is older than <minimum> and what to do (<hint>), or to "" when <found>
# is new enough. An empty <found> means the version could not be read, which is no problem.
function(chorus_version_problem var what found minimum hint)
  set(text "")
  if(NOT found STREQUAL "" AND found VERSION_LESS minimum)
    set(text "Chorus needs ${what} ${minimum} or newer, found ${found}. ${hint}")
  endif()
  set(${var} "${text}" PARENT_SCOPE)
endfunction()

# chorus_require(<what> <found> <minimum> <hint>): stops configure when <found> is too old.
function(chorus_require what found minimum hint)
  chorus_version_problem(text "${what}" "${found}" "${minimum}" "${hint}")
  if(text)
    message(FATAL_ERROR "${text}")
  endif()
endfunction()

# The compiler, checked first: everything else is wasted on one that cannot compile Chorus.
function(chorus_require_compiler)
  set(hint "On a cluster, `module load gcc` (11 or newer) and configure a new build directory, \
or point CXX at a newer compiler (${CMAKE_CXX_COMPILER} was used).")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    chorus_require("GCC" "${CMAKE_CXX_COMPILER_VERSION}" ${CHORUS_MIN_GCC} "${hint}")
  elseif(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    chorus_require("Clang" "${CMAKE_CXX_COMPILER_VERSION}" ${CHORUS_MIN_CLANG} "${hint}")
  endif()
endfunction()

# The MPI standard the library implements, and Open MPI's own version when it is Open MPI
# (from MPI_Get_library_version: "Open MPI v4.1.4, package: ...").
function(chorus_require_mpi)
  set(hint "Load a newer MPI module (Open MPI ${CHORUS_MIN_OPEN_MPI} or newer); configure takes \
the MPI whose mpicc is first on PATH, or MPI_HOME.")
  chorus_require("an MPI of standard" "${MPI_C_VERSION}" ${CHORUS_MIN_MPI_STANDARD} "${hint}")
  if(MPI_C_LIBRARY_VERSION_STRING MATCHES "Open MPI v([0-9]+[.][0-9]+[.0-9]*)")
    chorus_require("Open MPI" "${CMAKE_MATCH_1}" ${CHORUS_MIN_OPEN_MPI} "${hint}")
  endif()
endfunction()
