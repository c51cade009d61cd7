// Sums each rank's number with the installed Chorus; exits non-zero on a wrong result.
#include <chorus/chorus.h>

#include <cstdio>

int main() {
  if (chorus::Status s = chorus::init(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    return 1;
  }
  double x = chorus::rank() + 1;
  chorus::TensorRef t{&x, chorus::DataType::kFloat64, {1}, chorus::Device::cpu()};
  chorus::AllreduceOptions sum;
  sum.op = chorus::ReduceOp::kSum;
  chorus::Status s = chorus::allreduce("consumer.x", t, t, sum).wait();
  const int n = chorus::size();
  chorus::shutdown();
  if (!s.ok() || x != n * (n + 1) / 2.0) {
    std::fprintf(stderr, "consumer: got %g (%s)\n", x, s.to_string().c_str());
    return 1;
  }
  std::printf("consumer: Chorus %s, sum over %d ranks = %g\n", CHORUS_VERSION_STRING, n, x);
  return 0;
}
