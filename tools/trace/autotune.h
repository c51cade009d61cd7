#pragma once
// chorus-trace autotune: the autotuner's log (CHORUS_AUTOTUNE_LOG, src/core/autotuner.h) as a
// chart in the terminal: one line per sample with its setting, its score as a bar scaled to
// the best sample, the spread across the ranks and the gain over the defaults; the winner's
// samples marked, and the winner's line last.

#include <string>

#include "chorus/status.h"

namespace chorus::trace {

/// The chart of the log's text `csv`; fails naming the line that is not a row of the log.
StatusOr<std::string> autotune_chart(const std::string& csv);
/// autotune_chart() of the file at `path`.
StatusOr<std::string> autotune_chart_of(const std::string& path);

}  // namespace chorus::trace
