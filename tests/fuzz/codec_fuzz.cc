// libFuzzer target of the wire codec: arbitrary bytes must decode to an error or to a value
// that survives another trip through the codec unchanged. Crashes, sanitizer reports and
// the abort()s below are what the fuzzer looks for; build with tests/fuzz/CMakeLists.txt.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/codec.h"
#include "protocol/message.h"

namespace {

using chorus::codec::decode_request_list;
using chorus::codec::decode_response_list;
using chorus::codec::encode;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "codec_fuzz: %s\n", what);
  std::abort();
}

// NaN compares unequal to itself, so a list holding one cannot equal its own decoded copy;
// for those the byte-exact re-encoding check below stands in for the value check.
bool has_nan(const chorus::RequestList& list) {
  for (const auto& q : list.requests) {
    if (std::isnan(q.prescale) || std::isnan(q.postscale)) return true;
  }
  for (const auto& s : list.waiting) {
    if (std::isnan(s.waited_seconds)) return true;
  }
  return std::isnan(list.idle_seconds);
}

bool has_nan(const chorus::ResponseList& list) {
  for (const auto& p : list.responses) {
    if (std::isnan(p.prescale) || std::isnan(p.postscale)) return true;
  }
  return false;
}

// Every value has one encoding (codec.h), so a successful decode must re-encode to exactly
// the input, and decoding that again must give an equal value.
template <class Decode>
void check(std::string_view bytes, Decode decode) {
  const auto first = decode(bytes);
  if (!first.ok()) {
    if (first.status().code() != chorus::StatusCode::kDataLoss) fail("error is not DATA_LOSS");
    return;
  }
  const std::string again = encode(*first);
  if (again != bytes) fail("re-encoding differs from the decoded bytes");
  const auto second = decode(again);
  if (!second.ok()) fail("re-encoded message does not decode");
  if (!(*second == *first) && !has_nan(*first)) fail("decoded value changed on a round trip");
  if (encode(*second) != again) fail("second re-encoding differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check(bytes, decode_request_list);
  check(bytes, decode_response_list);
  return 0;
}
