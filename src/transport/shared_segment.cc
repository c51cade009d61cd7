#include "transport/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "transport/control_transport.h"

namespace chorus {
namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Maps the segment `name` of `bytes` (creating it when `create`), or says why not.
void* map_segment(const std::string& name, std::size_t bytes, bool create, std::string* why) {
  const int fd = shm_open(name.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) {
    *why = errno_text("shm_open");
    return nullptr;
  }
  // Reserved now rather than on first touch: where /dev/shm is too small (a container's
  // default), this fails here, instead of a SIGBUS in the middle of a reduction.
  if (create) {
    const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (err != 0) {
      errno = err;
      *why = errno_text("posix_fallocate");
      close(fd);
      shm_unlink(name.c_str());
      return nullptr;
    }
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    *why = errno_text("mmap");
    if (create) shm_unlink(name.c_str());
    return nullptr;
  }
  return p;
}

}  // namespace

SharedSegment::~SharedSegment() { unmap(); }

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    unmap();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void SharedSegment::unmap() {
  if (data_) munmap(data_, bytes_);
  data_ = nullptr;
  bytes_ = 0;
}

Status SharedSegment::join(ControlTransport& host, const std::string& what, std::size_t bytes,
                           const std::function<void(void*)>& init, std::string* why) {
  unmap();
  std::string name;
  auto map = [&](bool create) {
    data_ = map_segment(name, bytes, create, why);
    bytes_ = data_ ? bytes : 0;
  };
  if (host.rank() == 0) {
    static std::atomic<int> segments{0};
    name = "/chorus-" + what + "-" + std::to_string(getpid()) + "-" + std::to_string(segments++);
    map(/*create=*/true);
    if (!data_) name.clear();
    if (data_ && init) init(data_);
  }
  Status s = host.broadcast(&name);
  if (s.ok() && host.rank() != 0 && !name.empty()) map(/*create=*/false);
  // All or none: a rank that could not map the segment would never answer the others.
  std::string verdict = "1";
  if (s.ok()) {
    StatusOr<std::vector<std::string>> mapped = host.gather(data_ ? "1" : "0");
    s = mapped.status();
    for (const std::string& m : mapped.ok() ? *mapped : std::vector<std::string>()) {
      if (m != "1") verdict = "0";
    }
  }
  if (s.ok()) s = host.broadcast(&verdict);
  if (host.rank() == 0 && !name.empty()) shm_unlink(name.c_str());
  if (!s.ok() || verdict != "1") {
    if (s.ok() && why->empty()) *why = "another rank could not map it";
    unmap();
  }
  return s;
}

}  // namespace chorus
