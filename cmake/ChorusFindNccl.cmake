# Where NCCL is on a user's machine. A function of its arguments and the environment only, so
# it also runs in script mode (tests/cmake/find_nccl.cmake); cmake/ChorusOptions.cmake caches
# and reports what it finds.

# chorus_find_nccl(<prefix> [INCLUDE_DIR <dir>] [LIBRARY <file>] [PYTHON <exe>]
#                  [TOOLKIT_ROOT <dir>] [SYSTEM])
# Looks, in this order, and takes the first place that has both nccl.h and the library:
#   explicit  INCLUDE_DIR / LIBRARY (the user's CHORUS_NCCL_*); a missing half is looked for
#             beside the other; nothing else is tried, since the user named this one
#   NCCL_HOME, NCCL_ROOT, NCCL_DIR  each a CMake variable or else an environment variable,
#             naming a prefix with include/ and lib/ or lib64/
#   CPATH     its directories for nccl.h, LIBRARY_PATH's then LD_LIBRARY_PATH's for the library
#             (what `module load nccl` sets)
#   wheel     nvidia/nccl/{include,lib} of the nvidia-nccl wheel that PYTHON imports
#   toolkit   the CUDA toolkit at TOOLKIT_ROOT
#   system    CMake's default search paths, with SYSTEM (Debian's libnccl-dev)
# The library is libnccl.so or, as the wheel ships it, only libnccl.so.2. Among the library
# directories, those beside nccl.h's come first, so that header and library are one NCCL.
# Sets in the caller: <prefix>_FOUND, _INCLUDE_DIR, _LIBRARY, _VERSION (from nccl.h), _SOURCE
# (one of the names above), _REPORT (one line: what was found, or where it was looked for),
# and _WARNINGS (texts the caller shows as warnings: a place the user named that holds no
# usable NCCL, a library whose version differs from the header's).
function(chorus_find_nccl prefix)
  cmake_parse_arguments(PARSE_ARGV 1 arg "SYSTEM" "INCLUDE_DIR;LIBRARY;PYTHON;TOOLKIT_ROOT" "")
  set(warnings "")
  set(looked "")  # "<place> (<what was missing>)", for the report when nothing is found
  set(header "")
  set(library "")

  if(arg_INCLUDE_DIR OR arg_LIBRARY)
    set(place "CHORUS_NCCL_INCLUDE_DIR/CHORUS_NCCL_LIBRARY")
    set(inc "${arg_INCLUDE_DIR}")
    if(NOT inc)
      # <prefix>/include for a given <prefix>/lib/libnccl.so.
      cmake_path(GET arg_LIBRARY PARENT_PATH inc)
      cmake_path(GET inc PARENT_PATH inc)
      string(APPEND inc "/include")
    endif()
    _chorus_nccl_header(header "${inc}")
    if(NOT header)
      set(why "no ${inc}/nccl.h")
    elseif(arg_LIBRARY)
      set(why "no file ${arg_LIBRARY}")
      if(EXISTS "${arg_LIBRARY}" AND NOT IS_DIRECTORY "${arg_LIBRARY}")
        set(library "${arg_LIBRARY}")
      endif()
    else()
      set(why "no libnccl.so beside ${header}")
      cmake_path(GET header PARENT_PATH root)
      _chorus_nccl_library(library "${header}" "${root}/lib;${root}/lib64")
    endif()
    if(library)
      set(source explicit)
    else()
      list(APPEND warnings "${place}: ${why}")
      list(APPEND looked "${place} (${why})")
    endif()
  else()
    foreach(name IN ITEMS NCCL_HOME NCCL_ROOT NCCL_DIR)
      set(root "$ENV{${name}}")
      if(${name})  # a CMake variable, unless empty or *-NOTFOUND
        set(root "${${name}}")
      endif()
      if(NOT root)
        continue()
      endif()
      _chorus_nccl_pair(header library why "${root}/include" "${root}/lib;${root}/lib64")
      if(library)
        set(source ${name})
        set(place "${name}=${root}")
        break()
      endif()
      list(APPEND warnings "${name}=${root} holds no usable NCCL (${why}), looking elsewhere")
      list(APPEND looked "${name}=${root} (${why})")
    endforeach()

    if(NOT library AND NOT "$ENV{CPATH}" STREQUAL "")
      string(REPLACE ":" ";" inc "$ENV{CPATH}")
      string(REPLACE ":" ";" lib_dirs "$ENV{LIBRARY_PATH}:$ENV{LD_LIBRARY_PATH}")
      _chorus_nccl_pair(header library why "${inc}" "${lib_dirs}")
      if(library)
        set(source CPATH)
        set(place "CPATH and LIBRARY_PATH/LD_LIBRARY_PATH")
      else()
        list(APPEND looked "CPATH (${why})")
      endif()
    endif()

    if(NOT library AND arg_PYTHON)
      # nvidia is a namespace package (no __init__.py, no __file__): __path__ lists every
      # site-packages directory that holds a part of nvidia.nccl.
      execute_process(COMMAND "${arg_PYTHON}" -c
                              "import nvidia.nccl as m; print('\\n'.join(m.__path__))"
                      OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_QUIET TIMEOUT 60
                      OUTPUT_STRIP_TRAILING_WHITESPACE)
      set(why "not installed")
      if(rc EQUAL 0 AND NOT out STREQUAL "")
        string(REPLACE "\n" ";" wheel_dirs "${out}")
        foreach(dir IN LISTS wheel_dirs)
          _chorus_nccl_pair(header library why "${dir}/include" "${dir}/lib")
          if(library)
            break()
          endif()
        endforeach()
      endif()
      if(library)
        set(source wheel)
        set(place "the nvidia-nccl wheel of ${arg_PYTHON}")
      else()
        list(APPEND looked "the nvidia-nccl wheel of ${arg_PYTHON} (${why})")
      endif()
    endif()

    if(NOT library AND arg_TOOLKIT_ROOT)
      set(root "${arg_TOOLKIT_ROOT}")
      # The toolkit's own layout keeps headers and libraries under targets/<arch>/ too.
      file(GLOB targets LIST_DIRECTORIES true "${root}/targets/*")
      list(TRANSFORM targets APPEND "/include" OUTPUT_VARIABLE target_inc)
      list(TRANSFORM targets APPEND "/lib" OUTPUT_VARIABLE target_lib)
      _chorus_nccl_pair(header library why "${root}/include;${target_inc}"
                        "${root}/lib64;${root}/lib;${target_lib}")
      if(library)
        set(source toolkit)
        set(place "the CUDA toolkit ${root}")
      else()
        list(APPEND looked "the CUDA toolkit ${root} (${why})")
      endif()
    endif()

    if(NOT library AND arg_SYSTEM)
      find_path(system_header nccl.h NO_CACHE)
      find_library(system_library NAMES nccl libnccl.so.2 NO_CACHE)
      if(system_header AND system_library)
        set(header "${system_header}")
        set(library "${system_library}")
        set(source system)
        set(place "the system's directories")
      else()
        list(APPEND looked "the system's directories")
      endif()
    endif()
  endif()

  set(found FALSE)
  set(version "")
  if(library)
    set(found TRUE)
    _chorus_nccl_header_version(version "${header}/nccl.h")
    set(report "NCCL ${version} from ${place} (header ${header}, library ${library})")
    # The file a soname link resolves to carries the full version where the build kept it
    # (libnccl.so.2.28.9); a different one means the header is another NCCL's.
    file(REAL_PATH "${library}" real)
    if(real MATCHES "libnccl[.]so[.]([0-9]+[.][0-9]+[.][0-9]+)$")
      if(NOT CMAKE_MATCH_1 STREQUAL version)
        string(CONCAT text "NCCL's header ${header}/nccl.h says ${version} but its library "
                           "${real} is ${CMAKE_MATCH_1}: point NCCL_HOME at one NCCL")
        list(APPEND warnings "${text}")
      endif()
    endif()
  else()
    set(source "")
    set(header "")
    list(JOIN looked "; " looked)
    if(looked STREQUAL "")
      set(looked "nowhere: no NCCL_HOME, NCCL_ROOT, NCCL_DIR, CPATH, Python or CUDA toolkit")
    endif()
    set(hint "set NCCL_HOME to NCCL's prefix")
    if(arg_INCLUDE_DIR OR arg_LIBRARY)
      set(hint "correct them, or clear them and set NCCL_HOME")
    endif()
    set(report "no NCCL: looked in ${looked}; ${hint}")
  endif()
  foreach(var IN ITEMS found library version source report warnings)
    string(TOUPPER "${var}" suffix)
    set(${prefix}_${suffix} "${${var}}" PARENT_SCOPE)
  endforeach()
  set(${prefix}_INCLUDE_DIR "${header}" PARENT_SCOPE)
endfunction()

# _chorus_nccl_pair(<header-var> <library-var> <why-var> <include-dirs> <library-dirs>): the
# first include directory with nccl.h and its library (_chorus_nccl_library). Either half
# missing: both empty, and <why-var> says which.
function(_chorus_nccl_pair header_var library_var why_var include_dirs library_dirs)
  _chorus_nccl_header(header "${include_dirs}")
  set(library "")
  set(why "no nccl.h")
  if(header)
    _chorus_nccl_library(library "${header}" "${library_dirs}")
    set(why "nccl.h but no libnccl.so or libnccl.so.2")
  endif()
  if(NOT library)
    set(header "")
  endif()
  set(${header_var} "${header}" PARENT_SCOPE)
  set(${library_var} "${library}" PARENT_SCOPE)
  set(${why_var} "${why}" PARENT_SCOPE)
endfunction()

# _chorus_nccl_header(<var> <dirs>): the first of <dirs> that holds nccl.h, or "".
function(_chorus_nccl_header var dirs)
  set(${var} "" PARENT_SCOPE)
  foreach(dir IN LISTS dirs)
    string(REGEX REPLACE "(.)/+$" "\\1" dir "${dir}")
    if(NOT dir STREQUAL "" AND EXISTS "${dir}/nccl.h")
      set(${var} "${dir}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
endfunction()

# _chorus_nccl_library(<var> <header-dir> <dirs>): the first libnccl.so, else libnccl.so.2, in
# <dirs>, taking first those beside <header-dir> (<prefix>/lib* for <prefix>/include), so that
# a path that lists another NCCL's library first does not pair it with this header.
function(_chorus_nccl_library var header_dir dirs)
  cmake_path(GET header_dir PARENT_PATH prefix)
  set(beside "")
  set(others "")
  foreach(dir IN LISTS dirs)
    string(REGEX REPLACE "(.)/+$" "\\1" dir "${dir}")  # /opt/nccl/lib/ is in /opt/nccl
    if(dir STREQUAL "")
      continue()
    endif()
    cmake_path(GET dir PARENT_PATH parent)
    if(parent STREQUAL prefix)
      list(APPEND beside "${dir}")
    else()
      list(APPEND others "${dir}")
    endif()
  endforeach()
  set(${var} "" PARENT_SCOPE)
  foreach(dir IN LISTS beside others)
    foreach(name IN ITEMS libnccl.so libnccl.so.2)
      if(EXISTS "${dir}/${name}")
        set(${var} "${dir}/${name}" PARENT_SCOPE)
        return()
      endif()
    endforeach()
  endforeach()
endfunction()

# _chorus_nccl_header_version(<var> <nccl.h>): "major.minor.patch" from its defines.
function(_chorus_nccl_header_version var file)
  file(STRINGS "${file}" defines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  set(parts "")
  foreach(part IN ITEMS MAJOR MINOR PATCH)
    set(value "?")
    foreach(line IN LISTS defines)
      if(line MATCHES "^#define NCCL_${part} +([0-9]+)")
        set(value "${CMAKE_MATCH_1}")
      endif()
    endforeach()
    list(APPEND parts "${value}")
  endforeach()
  list(JOIN parts "." version)
  set(${var} "${version}" PARENT_SCOPE)
endfunction()
