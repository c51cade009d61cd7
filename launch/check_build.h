#pragma once
// chorusrun --version and --check-build: what this build of Chorus has, as configure found it,
// and whether its libraries load on this host and python3 imports its Python package.

#include <string>

namespace chorus::launch {

/// "chorusrun (Chorus) 0.1.0"
std::string version_line();
/// The report of --check-build. Loads the libraries (dlopen) and runs python3 on PATH.
std::string check_build();

}  // namespace chorus::launch
