// A fixture that lint.thread_safety_refuses_unguarded compiles: it reads a guarded member
// without its mutex, which the thread-safety check must refuse.
#include "base/mutex.h"

namespace chorus {

class Counter {
 public:
  int read_unlocked() const { return value_; }

 private:
  mutable Mutex mu_;
  int value_ CHORUS_GUARDED_BY(mu_) = 0;
};

int read(const Counter& c) { return c.read_unlocked(); }

}  // namespace chorus
