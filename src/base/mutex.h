#pragma once
// A std::mutex that clang's thread-safety analysis knows (base/thread_annotations.h), and
// its scoped lock. libstdc++'s own mutex carries no annotations.

#include <mutex>

#include "base/thread_annotations.h"

namespace chorus {

class CHORUS_CAPABILITY("mutex") Mutex {
 public:
  void lock() CHORUS_ACQUIRE() { mu_.lock(); }
  void unlock() CHORUS_RELEASE() { mu_.unlock(); }
  bool try_lock() CHORUS_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  /// Tells the analysis that the caller holds the mutex where it cannot see it: in a
  /// lambda that runs under the caller's lock. Checks nothing at run time.
  void assert_held() const CHORUS_ASSERT_HELD() {}

 private:
  std::mutex mu_;
};

class CHORUS_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) CHORUS_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() CHORUS_RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

}  // namespace chorus
