#pragma once
// Agreeing at init() on what every rank must share. A rank that fails a set-up step alone
// and returns would leave the others waiting in the next collective call, and settings that
// shape what ranks do together (core/config.h, Config::agreed) would, if they differed, make
// ranks plan different work and compute wrong numbers. So after each set-up step every rank
// reports the step's outcome (and, at the first step, its settings) to every other, and all
// of them return the same verdict. Pure: the runtime moves the reports over MPI
// (core/runtime_setup.cc); tests call these directly.

#include <string>
#include <utility>
#include <vector>

#include "chorus/status.h"
#include "core/config.h"

namespace chorus {

/// One rank's report: the outcome of its step and its agreed settings (empty after the
/// first step).
std::string encode_init_report(const Status& local, const Settings& settings);

/// The verdict of `step` on this rank, whose own outcome is `local`, from every rank's report
/// (index = rank): `local` where this rank failed; otherwise a Status naming the ranks that failed
/// and the first failure, or an INVALID_ARGUMENT that names each setting on which ranks differ and
/// which ranks have which value; OK when every rank succeeded with the same settings. The same
/// verdict, but for the failing rank's own message, on every rank. A report that does not
/// decode is a failure of its rank.
Status decide_init(const std::string& step, const Status& local,
                   const std::vector<std::string>& reports);

}  // namespace chorus
