# chorus_find_nccl (cmake/ChorusFindNccl.cmake) over fake NCCL installs, one per place it
# looks, each with its own version so that a check sees which one was taken. Peeling them
# off one by one checks the order; the last checks say why nothing was found.
#   cmake -DCHORUS_SOURCE_DIR=<repo> -DWORK_DIR=<scratch dir> [-DPYTHON=<python3>] -P find_nccl.cmake
# Without PYTHON the wheel is not checked.
cmake_minimum_required(VERSION 3.24)
include(${CHORUS_SOURCE_DIR}/cmake/ChorusFindNccl.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)

file(REMOVE_RECURSE "${WORK_DIR}")
set(w "${WORK_DIR}")

# fake_nccl(<include-dir> <library-file> <version>): nccl.h saying <version>, and the library.
function(fake_nccl include_dir library version)
  string(REPLACE "." ";" parts "${version}")
  list(GET parts 0 major)
  list(GET parts 1 minor)
  list(GET parts 2 patch)
  file(WRITE "${include_dir}/nccl.h" "#define NCCL_MAJOR ${major}\n#define NCCL_MINOR ${minor}\n"
                                     "#define NCCL_PATCH ${patch}\n#define NCCL_SUFFIX \"\"\n")
  file(WRITE "${library}" "")
endfunction()

fake_nccl(${w}/home/include ${w}/home/lib/libnccl.so 2.21.1)
fake_nccl(${w}/root/include ${w}/root/lib64/libnccl.so 2.21.2)
fake_nccl(${w}/dir/include ${w}/dir/lib/libnccl.so 2.21.3)
# A module's NCCL, and LIBRARY_PATH listing another NCCL's library before it.
fake_nccl(${w}/module/include ${w}/module/lib/libnccl.so 2.21.4)
file(WRITE ${w}/other/lib/libnccl.so "")
# The wheel: a namespace package, libnccl.so.2 only.
set(site ${w}/site-packages)
fake_nccl(${site}/nvidia/nccl/include ${site}/nvidia/nccl/lib/libnccl.so.2 2.21.5)
fake_nccl(${w}/cuda/targets/x86_64-linux/include ${w}/cuda/targets/x86_64-linux/lib/libnccl.so
          2.21.6)
file(MAKE_DIRECTORY ${w}/empty ${w}/no-cuda)

foreach(name IN ITEMS NCCL_HOME NCCL_ROOT NCCL_DIR CPATH LIBRARY_PATH LD_LIBRARY_PATH)
  unset(ENV{${name}})
endforeach()
set(ENV{PYTHONPATH} ${site})
set(ENV{PYTHONNOUSERSITE} 1)
set(ENV{NCCL_HOME} ${w}/home)
set(ENV{NCCL_ROOT} ${w}/root)
set(NCCL_DIR ${w}/dir)  # a CMake variable, as -DNCCL_DIR= gives it
set(ENV{CPATH} ${w}/module/include)
set(ENV{LIBRARY_PATH} ${w}/other/lib:${w}/module/lib)
set(everywhere PYTHON "${PYTHON}" TOOLKIT_ROOT ${w}/cuda)

# Each place in turn; then it is taken away.
chorus_find_nccl(n ${everywhere})
expect(n_SOURCE NCCL_HOME)
expect(n_VERSION 2.21.1)
expect(n_INCLUDE_DIR ${w}/home/include)
expect(n_LIBRARY ${w}/home/lib/libnccl.so)
expect(n_WARNINGS "")
expect(n_REPORT "NCCL 2.21.1 from NCCL_HOME=${w}/home (header ${w}/home/include, library ${w}/home/lib/libnccl.so)")
unset(ENV{NCCL_HOME})

chorus_find_nccl(n ${everywhere})
expect(n_SOURCE NCCL_ROOT)
expect(n_LIBRARY ${w}/root/lib64/libnccl.so)
unset(ENV{NCCL_ROOT})

chorus_find_nccl(n ${everywhere})
expect(n_SOURCE NCCL_DIR)
expect(n_VERSION 2.21.3)
unset(NCCL_DIR)

chorus_find_nccl(n ${everywhere})
expect(n_SOURCE CPATH)
expect(n_VERSION 2.21.4)
expect(n_LIBRARY ${w}/module/lib/libnccl.so)  # beside the header, not other/'s
# The library from LD_LIBRARY_PATH alone, as some modules set only that.
unset(ENV{LIBRARY_PATH})
set(ENV{LD_LIBRARY_PATH} ${w}/module/lib/)
chorus_find_nccl(n ${everywhere})
expect(n_LIBRARY ${w}/module/lib/libnccl.so)
unset(ENV{CPATH})
unset(ENV{LD_LIBRARY_PATH})

if(PYTHON)
  chorus_find_nccl(n ${everywhere})
  expect(n_SOURCE wheel)
  expect(n_VERSION 2.21.5)
  expect(n_LIBRARY ${site}/nvidia/nccl/lib/libnccl.so.2)
endif()
unset(ENV{PYTHONPATH})

chorus_find_nccl(n TOOLKIT_ROOT ${w}/cuda)
expect(n_SOURCE toolkit)
expect(n_VERSION 2.21.6)
expect(n_INCLUDE_DIR ${w}/cuda/targets/x86_64-linux/include)

# A place the user named that holds nothing usable: a warning, and the search goes on.
set(ENV{NCCL_HOME} ${w}/empty)
set(NCCL_ROOT ${w}/module/include)
chorus_find_nccl(n TOOLKIT_ROOT ${w}/cuda)
expect(n_SOURCE toolkit)
list(LENGTH n_WARNINGS count)
expect(count 2)
expect_match(n_WARNINGS "NCCL_HOME=${w}/empty holds no usable NCCL [(]no nccl.h[)]")
expect_match(n_WARNINGS "NCCL_ROOT=${w}/module/include holds no usable NCCL")

# Nothing anywhere: the report names every place it looked.
chorus_find_nccl(n TOOLKIT_ROOT ${w}/no-cuda)
expect(n_FOUND FALSE)
expect(n_SOURCE "")
expect(n_LIBRARY "")
expect_match(n_REPORT "^no NCCL: looked in NCCL_HOME=${w}/empty [(]no nccl.h[)]; NCCL_ROOT=")
expect_match(n_REPORT "; the CUDA toolkit ${w}/no-cuda [(]no nccl.h[)]; set NCCL_HOME")
if(PYTHON)
  chorus_find_nccl(n PYTHON "${PYTHON}")
  expect_match(n_REPORT "the nvidia-nccl wheel of .* [(]not installed[)]")
endif()
unset(ENV{NCCL_HOME})
unset(NCCL_ROOT)
chorus_find_nccl(n)
expect_match(n_REPORT "^no NCCL: looked in nowhere")

# The user's CHORUS_NCCL_* win over NCCL_HOME; a half is looked for beside the other; a wrong
# one is reported, not replaced by another NCCL.
set(ENV{NCCL_HOME} ${w}/home)
chorus_find_nccl(n INCLUDE_DIR ${w}/dir/include LIBRARY ${w}/dir/lib/libnccl.so)
expect(n_SOURCE explicit)
expect(n_VERSION 2.21.3)
chorus_find_nccl(n LIBRARY ${w}/root/lib64/libnccl.so)
expect(n_INCLUDE_DIR ${w}/root/include)
chorus_find_nccl(n INCLUDE_DIR ${w}/root/include)
expect(n_LIBRARY ${w}/root/lib64/libnccl.so)
chorus_find_nccl(n INCLUDE_DIR ${w}/empty TOOLKIT_ROOT ${w}/cuda)
expect(n_FOUND FALSE)
expect_match(n_WARNINGS "no ${w}/empty/nccl.h")
expect_match(n_REPORT "; correct them, or clear them and set NCCL_HOME$")
unset(ENV{NCCL_HOME})

# A library whose file says another version than the header: found, with a warning.
fake_nccl(${w}/mixed/include ${w}/mixed/lib/libnccl.so.2.19.3 2.21.7)
file(CREATE_LINK libnccl.so.2.19.3 ${w}/mixed/lib/libnccl.so SYMBOLIC)
set(NCCL_HOME ${w}/mixed)
chorus_find_nccl(n)
expect(n_VERSION 2.21.7)
expect_match(n_WARNINGS "says 2.21.7 but its library .*libnccl.so.2.19.3 is 2.19.3")

file(REMOVE_RECURSE "${WORK_DIR}")
message(STATUS "find_nccl: all checks passed")
