#pragma once
// The worker's side of chorusrun's hosts notice (launch/hosts_notice.h): asks the
// supervisor for the hosts' version, which grows when its discovery script reports hosts
// the job could use.

#include <cstdint>
#include <string>

#include "chorus/status.h"

namespace chorus {

/// Connects to the first of `address`'s addresses ("10.0.0.5,127.0.0.1:40123") that
/// answers within `timeout_seconds` each, and reads the version line.
StatusOr<int64_t> ask_hosts_version(const std::string& address, double timeout_seconds);

}  // namespace chorus
