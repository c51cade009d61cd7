#pragma once
// Every MPI call goes through CHORUS_MPI_CHECK, which turns a failure into a Status naming
// the call, MPI's message and the place in the source. Communicators are set to
// MPI_ERRORS_RETURN so that failures reach it instead of aborting. It also refuses a call
// from any thread but the one that set MPI up for Chorus (init_mpi_world): Chorus asks MPI
// for MPI_THREAD_FUNNELED, and its trainer threads run some cycles (core/cycle.h), which
// must never reach MPI.

#include <mpi.h>

#include <string>

#include "chorus/status.h"

namespace chorus::mpi_detail {

/// True on the thread that called init_mpi_world.
inline thread_local bool t_mpi_thread = false;

inline Status off_thread(const char* call, const char* file, int line) {
  return internal_error(std::string(call) + " called off Chorus's MPI thread at " + file + ":" +
                        std::to_string(line));
}

inline Status mpi_status(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(code, text, &len);
  return internal_error(std::string(call) + " failed: " + std::string(text, len) + " (code " +
                        std::to_string(code) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace chorus::mpi_detail

#define CHORUS_MPI_CHECK(call)                                                            \
  do {                                                                                    \
    if (!::chorus::mpi_detail::t_mpi_thread) {                                            \
      return ::chorus::mpi_detail::off_thread(#call, __FILE__, __LINE__);                 \
    }                                                                                     \
    int chorus_mpi_rc_ = (call);                                                          \
    if (chorus_mpi_rc_ != MPI_SUCCESS) {                                                  \
      return ::chorus::mpi_detail::mpi_status(chorus_mpi_rc_, #call, __FILE__, __LINE__); \
    }                                                                                     \
  } while (0)
