#pragma once
// chorus-trace plot: a PNG of where each step's time went, drawn by chorus_trace_plot.py
// (Debian's python3-matplotlib) from the summary's steps (summary_json): each rank's mean
// step split into computing, waiting for peers and reducing, and a heat map of the waiting
// for peers, ranks by steps.

#include <string>

#include "chorus/status.h"
#include "summary.h"

namespace chorus::trace {

/// Where chorus_trace_plot.py is: beside this program (the build tree), else in
/// ../share/chorus/ from it (an installation).
std::string plot_script();

/// The Python that runs it: CHORUS_TRACE_PYTHON, else the one found with matplotlib when
/// Chorus was configured, else python3 on PATH.
std::string plot_python();

/// Draws `summary` into `png` (1200 x 900 pixels), titled `title` (empty: the default).
Status plot(const Summary& summary, const std::string& png, const std::string& title);

}  // namespace chorus::trace
