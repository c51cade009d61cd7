#include "unpacked_dataset.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

namespace examples {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFiles[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                  "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

chorus::Status gunzip(const fs::path& from, const fs::path& to) {
  gzFile in = gzopen(from.c_str(), "rb");
  if (!in) return chorus::invalid_argument("cannot open " + from.string());
  std::unique_ptr<gzFile_s, int (*)(gzFile)> close_in(in, gzclose);
  const fs::path partial = to.string() + ".partial." + std::to_string(getpid());
  std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(partial.c_str(), "wb"), std::fclose);
  if (!out) return chorus::invalid_argument("cannot write " + partial.string());
  std::vector<char> buffer(1 << 20);
  for (;;) {
    const int n = gzread(in, buffer.data(), static_cast<unsigned>(buffer.size()));
    if (n < 0) return {chorus::StatusCode::kDataLoss, "corrupt gzip data in " + from.string()};
    if (n == 0) break;
    if (std::fwrite(buffer.data(), 1, n, out.get()) != static_cast<std::size_t>(n)) {
      return chorus::internal_error("short write to " + partial.string());
    }
  }
  if (std::fclose(out.release()) != 0) {
    return chorus::internal_error("cannot close " + partial.string());
  }
  std::error_code ec;
  fs::rename(partial, to, ec);
  if (ec) return chorus::internal_error("cannot rename to " + to.string() + ": " + ec.message());
  return {};
}

}  // namespace

std::string default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return (fs::path(xdg) / "chorus" / "fashion-mnist").string();
  }
  const char* home = std::getenv("HOME");
  return (fs::path(home && *home ? home : "/tmp") / ".cache" / "chorus" / "fashion-mnist").string();
}

chorus::StatusOr<std::string> unpack_fashion_mnist(const std::string& source_dir,
                                                   const std::string& cache_dir) {
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec) return chorus::invalid_argument("cannot create " + cache_dir + ": " + ec.message());
  for (const char* name : kFiles) {
    const fs::path target = fs::path(cache_dir) / name;
    if (fs::exists(target)) continue;
    const fs::path source = fs::path(source_dir) / (std::string(name) + ".gz");
    if (!fs::exists(source)) {
      return chorus::invalid_argument(source.string() +
                                      " not found: install the Debian package "
                                      "dataset-fashion-mnist or pass --data-dir");
    }
    if (chorus::Status s = gunzip(source, target); !s.ok()) return s;
  }
  return cache_dir;
}

}  // namespace examples
