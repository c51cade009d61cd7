#pragma once
/// \file
/// Reads the gzip-compressed IDX files of MNIST and Fashion-MNIST
/// (http://yann.lecun.com/exdb/mnist/, "FILE FORMATS" at the bottom of the page).

#include <cstdint>
#include <string>
#include <vector>

#include "chorus/status.h"

namespace examples {

/// A labelled image set: image i is pixels[i * rows * cols, (i + 1) * rows * cols), row-major,
/// one byte per pixel (0 = background); labels[i] is its class.
struct LabelledImages {
  int64_t count = 0;
  int rows = 0;
  int cols = 0;
  std::vector<uint8_t> pixels;
  std::vector<uint8_t> labels;

  int64_t image_size() const { return static_cast<int64_t>(rows) * cols; }
};

/// Reads an idx3-ubyte image file and its idx1-ubyte label file (both gzip-compressed, as
/// the Debian dataset packages ship them). A missing file fails with kInvalidArgument naming
/// the path; a malformed one (bad magic, short read, counts that differ) with kDataLoss.
chorus::StatusOr<LabelledImages> read_idx_images(const std::string& images_path,
                                                 const std::string& labels_path);

}  // namespace examples
