# CHORUS_SANITIZE: compile and link every C and C++ target of the project under the named
# sanitizers (the asan and tsan presets of CMakePresets.json, run by
# scripts/test-sanitizers.sh). Empty (the default) builds without. Dependencies such as Open
# MPI, spdlog and GoogleTest stay as Debian built them, uninstrumented.
set(CHORUS_SANITIZE "" CACHE STRING
    "Sanitizers for every target: empty, address, undefined, address,undefined or thread")
set_property(CACHE CHORUS_SANITIZE PROPERTY STRINGS "" "address,undefined" "thread")

if(CHORUS_SANITIZE)
  string(REPLACE "," ";" _chorus_sanitizers "${CHORUS_SANITIZE}")
  foreach(_s IN LISTS _chorus_sanitizers)
    if(NOT _s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "CHORUS_SANITIZE='${CHORUS_SANITIZE}': unknown sanitizer '${_s}' "
                          "(expected address, undefined or thread, comma-separated)")
    endif()
  endforeach()
  if("thread" IN_LIST _chorus_sanitizers AND "address" IN_LIST _chorus_sanitizers)
    message(FATAL_ERROR "CHORUS_SANITIZE: thread and address cannot run in one process")
  endif()

  set(_chorus_sanitize_flags -fsanitize=${CHORUS_SANITIZE} -fno-omit-frame-pointer)
  if("undefined" IN_LIST _chorus_sanitizers)
    # UBSan only prints and goes on by default; abort instead, so any report fails its test.
    list(APPEND _chorus_sanitize_flags -fno-sanitize-recover=all)
  endif()
  # C and C++ only: nvcc takes no -fsanitize, so a CUDA build's .cu files stay uninstrumented.
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_chorus_sanitize_flags}>")
  add_link_options("$<$<LINK_LANGUAGE:C,CXX>:-fsanitize=${CHORUS_SANITIZE}>")
  message(STATUS "Chorus: CHORUS_SANITIZE=${CHORUS_SANITIZE}")
endif()
