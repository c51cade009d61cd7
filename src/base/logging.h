#pragma once
// Chorus's logger: spdlog, a logger of its own named "chorus" (the application's spdlog
// setup is left alone), with the rank in every line. CHORUS_LOG_LEVEL sets the level.

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace chorus {

/// The logger; before configure_logging() it prints warnings and worse without a rank.
spdlog::logger& log();
/// Sets the rank shown in every line and the level ("warn", "debug", ...).
void configure_logging(int rank, const std::string& level);

}  // namespace chorus
