#include "base/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace chorus {
namespace {

std::shared_ptr<spdlog::logger> make_logger() {
  if (auto existing = spdlog::get("chorus")) return existing;
  auto logger = spdlog::stderr_logger_mt("chorus");
  logger->set_pattern("[chorus] [%l] %v");
  logger->set_level(spdlog::level::warn);
  return logger;
}

}  // namespace

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = make_logger();
  return *logger;
}

void configure_logging(int rank, const std::string& level) {
  log().set_pattern("[chorus rank " + std::to_string(rank) + "] [%l] %v");
  log().set_level(spdlog::level::from_str(level));
  log().flush_on(spdlog::level::warn);
}

}  // namespace chorus
