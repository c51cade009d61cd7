#include "base/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace chorus {

int pwrite_all(int fd, std::string_view data, int64_t offset) {
  while (!data.empty()) {
    const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    data.remove_prefix(static_cast<std::size_t>(n));
    offset += n;
  }
  return 0;
}

int pread_all(int fd, char* out, std::size_t size, int64_t offset) {
  for (std::size_t got = 0; got < size;) {
    const ssize_t n = ::pread(fd, out + got, size - got, static_cast<off_t>(offset) + got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    got += static_cast<std::size_t>(n);
  }
  return 0;
}

int replace_file(const std::string& path, std::string_view text, int* keep_open) {
  return replace_file(path, {text}, keep_open);
}

int replace_file(const std::string& path, std::initializer_list<std::string_view> parts,
                 int* keep_open) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int err = 0;
  int64_t offset = 0;
  for (std::string_view part : parts) {
    if (err == 0) err = pwrite_all(fd, part, offset);
    offset += static_cast<int64_t>(part.size());
  }
  if (err == 0 && !keep_open && ::close(fd) != 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    if (keep_open) ::close(fd);
    ::unlink(tmp.c_str());
    return err;
  }
  if (keep_open) *keep_open = fd;
  return 0;
}

}  // namespace chorus
