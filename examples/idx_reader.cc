#include "idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <type_traits>

namespace examples {
namespace {

using chorus::Status;
using chorus::StatusCode;

Status data_loss(const std::string& path, const std::string& what) {
  return {StatusCode::kDataLoss, path + ": " + what};
}

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

// gzread takes an unsigned count, so large reads go in chunks.
Status read_exactly(gzFile f, const std::string& path, void* out, std::size_t bytes) {
  auto* p = static_cast<unsigned char*>(out);
  while (bytes > 0) {
    unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(bytes, 1u << 30));
    int got = gzread(f, p, chunk);
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      return data_loss(path, std::string("gzread failed: ") + msg);
    }
    if (got == 0) return data_loss(path, "file ends early (truncated download?)");
    p += got;
    bytes -= static_cast<std::size_t>(got);
  }
  return {};
}

// An IDX file: a big-endian magic (0, 0, element type, number of dimensions), the
// dimensions as big-endian int32, then the elements. Both files here hold unsigned bytes.
struct IdxHeader {
  std::vector<int64_t> dims;
};

chorus::StatusOr<IdxHeader> read_header(gzFile f, const std::string& path, int want_dims) {
  std::array<unsigned char, 4> magic{};
  if (Status s = read_exactly(f, path, magic.data(), magic.size()); !s.ok()) return s;
  constexpr unsigned char kUnsignedByte = 0x08;
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != kUnsignedByte || magic[3] != want_dims) {
    return data_loss(path, "not an IDX file of unsigned bytes with " + std::to_string(want_dims) +
                               " dimension(s)");
  }
  IdxHeader h;
  for (int i = 0; i < want_dims; ++i) {
    std::array<unsigned char, 4> b{};
    if (Status s = read_exactly(f, path, b.data(), b.size()); !s.ok()) return s;
    uint32_t d = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
    h.dims.push_back(d);
  }
  return h;
}

chorus::StatusOr<GzFile> open(const std::string& path) {
  errno = 0;
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) {
    std::string why = errno != 0 ? std::strerror(errno) : "out of memory";
    return Status(StatusCode::kInvalidArgument, "cannot open " + path + ": " + why);
  }
  gzbuffer(f.get(), 1 << 20);
  return f;
}

}  // namespace

chorus::StatusOr<LabelledImages> read_idx_images(const std::string& images_path,
                                                 const std::string& labels_path) {
  LabelledImages set;

  chorus::StatusOr<GzFile> images = open(images_path);
  if (!images.ok()) return images.status();
  chorus::StatusOr<IdxHeader> ih = read_header(images->get(), images_path, 3);
  if (!ih.ok()) return ih.status();
  set.count = ih->dims[0];
  set.rows = static_cast<int>(ih->dims[1]);
  set.cols = static_cast<int>(ih->dims[2]);
  set.pixels.resize(static_cast<std::size_t>(set.count * set.image_size()));
  if (Status s = read_exactly(images->get(), images_path, set.pixels.data(), set.pixels.size());
      !s.ok()) {
    return s;
  }

  chorus::StatusOr<GzFile> labels = open(labels_path);
  if (!labels.ok()) return labels.status();
  chorus::StatusOr<IdxHeader> lh = read_header(labels->get(), labels_path, 1);
  if (!lh.ok()) return lh.status();
  if (lh->dims[0] != set.count) {
    return data_loss(labels_path, "holds " + std::to_string(lh->dims[0]) + " labels but " +
                                      images_path + " holds " + std::to_string(set.count) +
                                      " images");
  }
  set.labels.resize(static_cast<std::size_t>(set.count));
  if (Status s = read_exactly(labels->get(), labels_path, set.labels.data(), set.labels.size());
      !s.ok()) {
    return s;
  }
  return set;
}

}  // namespace examples
