#include "transport/commit_store.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <vector>

#include "base/file_io.h"

namespace chorus {
namespace {

constexpr char kPrefix[] = "commit-";

// A 64-bit checksum of the bytes, eight at a time: a torn or foreign file fails it.
uint64_t checksum(std::string_view bytes) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ bytes.size();
  std::size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
  }
  for (; i < bytes.size(); ++i) h = (h ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ull;
  return h ^ (h >> 32);
}

// "chorus-commit <number> <size> <checksum>\n"
std::string header(uint64_t number, std::string_view bytes) {
  char line[96];
  std::snprintf(line, sizeof line, "chorus-commit %" PRIu64 " %zu %016" PRIx64 "\n", number,
                bytes.size(), checksum(bytes));
  return line;
}

Status io_error(const std::string& what, const std::string& path, int err) {
  return Status(StatusCode::kInternal, what + " " + path + ": " + std::strerror(err));
}

}  // namespace

std::string CommitStore::path(uint64_t number) const {
  char name[40];
  std::snprintf(name, sizeof name, "%s%020" PRIu64, kPrefix, number);
  return dir_ + "/" + name;
}

StatusOr<std::vector<uint64_t>> CommitStore::numbers() const {
  std::vector<uint64_t> found;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir_, ec);
  if (ec == std::errc::no_such_file_or_directory) return found;
  if (ec) return io_error("cannot list the commits in", dir_, ec.value());
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    const std::size_t digits = name.size() - (sizeof kPrefix - 1);
    if (name.rfind(kPrefix, 0) != 0 || digits != 20) continue;
    if (!std::all_of(name.end() - 20, name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    found.push_back(std::stoull(name.substr(sizeof kPrefix - 1)));
  }
  std::sort(found.rbegin(), found.rend());
  return found;
}

Status CommitStore::write(uint64_t number, std::string_view bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return io_error("cannot make the commit directory", dir_, ec.value());
  StatusOr<std::vector<uint64_t>> stored = numbers();
  if (!stored.ok()) return stored.status();
  if (!stored->empty() && stored->front() >= number) {
    return invalid_argument("commit " + std::to_string(number) + " is not newer than commit " +
                            std::to_string(stored->front()) + " in " + dir_);
  }
  if (int err = replace_file(path(number), {header(number, bytes), bytes}); err != 0) {
    return io_error("cannot write", path(number), err);
  }
  for (std::size_t i = static_cast<std::size_t>(std::max(keep_, 1)) - 1; i < stored->size(); ++i) {
    std::filesystem::remove(path((*stored)[i]), ec);
  }
  return {};
}

Status CommitStore::drop_after(uint64_t number) {
  StatusOr<std::vector<uint64_t>> stored = numbers();
  if (!stored.ok()) return stored.status();
  for (uint64_t n : *stored) {
    std::error_code ec;
    if (n > number && !std::filesystem::remove(path(n), ec) && ec) {
      return io_error("cannot remove", path(n), ec.value());
    }
  }
  return {};
}

Status CommitStore::remove_all() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  if (ec) return io_error("cannot remove the commits in", dir_, ec.value());
  return {};
}

StatusOr<std::optional<Commit>> CommitStore::newest() const {
  StatusOr<std::vector<uint64_t>> stored = numbers();
  if (!stored.ok()) return stored.status();
  for (uint64_t number : *stored) {
    std::ifstream in(path(number), std::ios::binary);
    std::string first;
    if (!in || !std::getline(in, first)) continue;
    Commit c;
    c.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    c.number = number;
    // The header names this file's number, size and checksum: anything else is not a commit.
    if (first + "\n" == header(number, c.bytes)) return std::optional<Commit>(std::move(c));
  }
  return std::optional<Commit>();
}

}  // namespace chorus
