#pragma once
/// \file
/// LibTorch's MNIST dataset reads plain IDX files; Debian's dataset-fashion-mnist ships
/// them gzip-compressed. This unpacks them once into a cache directory.

#include <string>

#include "chorus/status.h"

namespace examples {

/// Makes sure `cache_dir` holds the four Fashion-MNIST IDX files un-gzipped from
/// `source_dir`, and returns `cache_dir`. Each file is written under a temporary name and
/// renamed, so ranks that unpack at the same time never see half a file.
chorus::StatusOr<std::string> unpack_fashion_mnist(const std::string& source_dir,
                                                   const std::string& cache_dir);

/// $XDG_CACHE_HOME/chorus/fashion-mnist, or ~/.cache/chorus/fashion-mnist.
std::string default_cache_dir();

}  // namespace examples
