// Wire codec of negotiation messages; the layout is documented in codec.h.
#include "core/codec.h"

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

namespace chorus::codec {
namespace {

constexpr int kNumDeviceKinds = 2;  // Device::Kind: kCPU, kCUDA

// Smallest encoding of one element (every string and vector empty). A count prefix is
// checked against these before any element is decoded, so a forged count can neither
// allocate nor loop beyond what the bytes actually present could hold. codec_test pins the
// sizes (LayoutIsLittleEndianAndFixed), so a new field cannot leave them stale unnoticed.
// rank 4, op 1, name 4, dtype 1, reduce_op 1, device 5, shape 4, root 4, prescale 8,
// postscale 8, splits 4, group 4, group_size 4, group_index 4, ranks 4, target_set 4.
constexpr std::size_t kMinRequestBytes = 64;
// slot 4, waited_seconds 8.
constexpr std::size_t kMinWaitingSlotBytes = 12;
// op 1, name 4, status 1+4, dtype 1, reduce_op 1, device 5, shape 4, root 4, prescale 8,
// postscale 8, first_dims 4, splits 4, group_size 4, group_index 4, group 4,
// last_joined_rank 4, new_set_id 4, ranks 4, target_set 4.
constexpr std::size_t kMinResponseBytes = 77;
// A string: its length, 4.
constexpr std::size_t kMinStringBytes = 4;

// Appends little-endian fixed-width fields to a string. Bytes are written one at a time
// from the value, so the output does not depend on the host's byte order or struct layout.
class Writer {
 public:
  void u8(uint8_t v) { fixed(v, 1); }
  void u16(uint16_t v) { fixed(v, 2); }
  void u32(uint32_t v) { fixed(v, 4); }
  void i32(int32_t v) { fixed(static_cast<uint32_t>(v), 4); }
  void i64(int64_t v) { fixed(static_cast<uint64_t>(v), 8); }
  void f64(double v) { fixed(std::bit_cast<uint64_t>(v), 8); }
  template <class E>
  void enumerator(E v) {
    u8(static_cast<uint8_t>(v));
  }

  void length(std::size_t n) {
    if (n > UINT32_MAX) {
      std::fprintf(stderr, "chorus codec: %zu elements do not fit a uint32 length prefix\n", n);
      std::abort();
    }
    u32(static_cast<uint32_t>(n));
  }
  void str(std::string_view s) {
    length(s.size());
    out_.append(s);
  }
  template <class T>  // int32_t or int64_t
  void ints(const std::vector<T>& v) {
    length(v.size());
    for (T x : v) fixed(static_cast<std::make_unsigned_t<T>>(x), sizeof(T));
  }

  std::string take() && { return std::move(out_); }

 private:
  void fixed(uint64_t v, std::size_t width) {
    for (std::size_t i = 0; i < width; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }

  std::string out_;
};

// Checked reads from untrusted bytes. The first failure is latched: later reads return zero
// or empty values without consuming anything, so decoders read field after field and look
// at status() once, yet every failure still reports the first fault and its offset. Each
// read names its field (`what`) for the error message.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  std::size_t offset() const { return pos_; }
  std::size_t left() const { return bytes_.size() - pos_; }

  uint8_t u8(const char* what) { return static_cast<uint8_t>(fixed(what, 1)); }
  uint16_t u16(const char* what) { return static_cast<uint16_t>(fixed(what, 2)); }
  uint32_t u32(const char* what) { return static_cast<uint32_t>(fixed(what, 4)); }
  int32_t i32(const char* what) { return static_cast<int32_t>(u32(what)); }
  int64_t i64(const char* what) { return static_cast<int64_t>(fixed(what, 8)); }
  double f64(const char* what) { return std::bit_cast<double>(fixed(what, 8)); }

  // A uint8 enum that must be below `count`; out of range latches an error.
  template <class E>
  E enumerator(const char* what, int count) {
    const std::size_t at = pos_;
    const uint8_t v = u8(what);
    if (ok() && v >= count) {
      fail(std::string(what) + ": value " + std::to_string(v) + " at offset " + std::to_string(at) +
           " is out of range (must be below " + std::to_string(count) + ")");
      return E{};
    }
    return static_cast<E>(v);
  }

  // A length prefix for elements of at least `min_bytes` each, checked against the bytes
  // left so that the caller may reserve() it safely.
  uint32_t length(const char* what, std::size_t min_bytes) {
    const std::size_t at = pos_;
    const uint32_t n = u32(what);
    if (!ok() || n <= left() / min_bytes) return ok() ? n : 0;
    if (min_bytes == 1) {
      fail(std::string(what) + ": string length " + std::to_string(n) + " at offset " +
           std::to_string(at) + " exceeds the " + std::to_string(left()) + " bytes left");
    } else {
      fail(std::string(what) + ": length " + std::to_string(n) + " at offset " +
           std::to_string(at) + " needs at least " +
           std::to_string(static_cast<uint64_t>(n) * min_bytes) + " bytes but " +
           std::to_string(left()) + " are left");
    }
    return 0;
  }

  std::string str(const char* what) {
    const uint32_t n = length(what, 1);
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  template <class T>  // int32_t or int64_t
  std::vector<T> ints(const char* what) {
    std::vector<T> v(length(what, sizeof(T)));
    for (T& x : v) x = static_cast<T>(static_cast<std::make_unsigned_t<T>>(fixed(what, sizeof(T))));
    return v;
  }

  // After the last field: anything left over means sender and receiver disagree on the
  // layout, which must not pass silently.
  void expect_end(const char* what) {
    if (ok() && left() != 0) {
      fail(std::to_string(left()) + " trailing bytes at offset " + std::to_string(pos_) +
           " after the end of the " + what);
    }
  }

  void fail(std::string message) {
    if (ok()) status_ = Status(StatusCode::kDataLoss, "wire message: " + std::move(message));
  }

 private:
  uint64_t fixed(const char* what, std::size_t width) {
    if (!ok()) return 0;
    if (left() < width) {
      fail("truncated at offset " + std::to_string(pos_) + " reading " + what + ": needs " +
           std::to_string(width) + " bytes, " + std::to_string(left()) + " left");
      return 0;
    }
    uint64_t v = 0;
    for (std::size_t i = 0; i < width; ++i) {
      v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
    }
    pos_ += width;
    return v;
  }

  std::string_view bytes_;
  std::size_t pos_ = 0;
  Status status_;
};

const char* kind_name(uint8_t kind) {
  if (kind == static_cast<uint8_t>(MessageKind::kRequestList)) return "request list";
  return kind == static_cast<uint8_t>(MessageKind::kResponseList) ? "response list" : "unknown";
}

void write_header(Writer& w, MessageKind kind) {
  for (char c : kMagic) w.u8(static_cast<uint8_t>(c));
  w.u16(kWireVersion);
  w.enumerator(kind);
}

void read_header(Reader& r, MessageKind expected) {
  const std::size_t at_magic = r.offset();
  const uint32_t magic = r.u32("magic");
  uint32_t want = 0;
  for (std::size_t i = 0; i < 4; ++i) want |= static_cast<uint32_t>(kMagic[i]) << (8 * i);
  if (r.ok() && magic != want) {
    char hex[16];  // the four bytes in wire order
    std::snprintf(hex, sizeof hex, "%02x %02x %02x %02x", magic & 0xff, (magic >> 8) & 0xff,
                  (magic >> 16) & 0xff, magic >> 24);
    r.fail(std::string("bad magic bytes ") + hex + " at offset " + std::to_string(at_magic) +
           ", expected \"CHRS\" (43 48 52 53)");
    return;
  }
  const std::size_t at_version = r.offset();
  const uint16_t version = r.u16("version");
  if (r.ok() && version != kWireVersion) {
    r.fail("unsupported format version " + std::to_string(version) + " at offset " +
           std::to_string(at_version) + " (this build reads version " +
           std::to_string(kWireVersion) + ")");
    return;
  }
  const std::size_t at_kind = r.offset();
  const uint8_t kind = r.u8("message kind");
  if (r.ok() && kind != static_cast<uint8_t>(expected)) {
    r.fail("message kind " + std::to_string(kind) + " (" + kind_name(kind) + ") at offset " +
           std::to_string(at_kind) + ", expected " + std::to_string(static_cast<int>(expected)) +
           " (" + kind_name(static_cast<uint8_t>(expected)) + ")");
  }
}

void write_request(Writer& w, const Request& q) {
  w.i32(q.rank);
  w.enumerator(q.op);
  w.str(q.name);
  w.enumerator(q.dtype);
  w.enumerator(q.reduce_op);
  w.enumerator(q.device.kind);
  w.i32(q.device.index);
  w.ints(q.shape);
  w.i32(q.root);
  w.f64(q.prescale);
  w.f64(q.postscale);
  w.ints(q.splits);
  w.str(q.group);
  w.i32(q.group_size);
  w.i32(q.group_index);
  w.ints(q.ranks);
  w.i32(q.target_set);
}

Request read_request(Reader& r) {
  Request q;
  q.rank = r.i32("Request.rank");
  // A request's enumerations are taken as they come: a value this build does not know (a
  // peer built otherwise) fails that collective on every rank (check_request, in the
  // coordinator's decision), not the whole message.
  q.op = static_cast<OpType>(r.u8("Request.op"));
  q.name = r.str("Request.name");
  q.dtype = static_cast<DataType>(r.u8("Request.dtype"));
  q.reduce_op = static_cast<ReduceOp>(r.u8("Request.reduce_op"));
  q.device.kind = static_cast<Device::Kind>(r.u8("Request.device.kind"));
  q.device.index = r.i32("Request.device.index");
  q.shape = r.ints<int64_t>("Request.shape");
  q.root = r.i32("Request.root");
  q.prescale = r.f64("Request.prescale");
  q.postscale = r.f64("Request.postscale");
  q.splits = r.ints<int64_t>("Request.splits");
  q.group = r.str("Request.group");
  q.group_size = r.i32("Request.group_size");
  q.group_index = r.i32("Request.group_index");
  q.ranks = r.ints<int32_t>("Request.ranks");
  q.target_set = r.i32("Request.target_set");
  return q;
}

void write_response(Writer& w, const Response& p) {
  w.enumerator(p.op);
  w.str(p.name);
  w.enumerator(p.status.code());
  w.str(p.status.message());
  w.enumerator(p.dtype);
  w.enumerator(p.reduce_op);
  w.enumerator(p.device.kind);
  w.i32(p.device.index);
  w.ints(p.shape);
  w.i32(p.root);
  w.f64(p.prescale);
  w.f64(p.postscale);
  w.ints(p.first_dims);
  w.ints(p.splits);
  w.i32(p.group_size);
  w.i32(p.group_index);
  w.str(p.group);
  w.i32(p.last_joined_rank);
  w.i32(p.new_set_id);
  w.ints(p.ranks);
  w.i32(p.target_set);
}

Response read_response(Reader& r) {
  Response p;
  p.op = r.enumerator<OpType>("Response.op", kNumOpTypes);
  p.name = r.str("Response.name");
  const auto code = r.enumerator<StatusCode>("Response.status.code", kNumStatusCodes);
  std::string message = r.str("Response.status.message");
  p.status = Status(code, std::move(message));
  p.dtype = r.enumerator<DataType>("Response.dtype", kNumDataTypes);
  p.reduce_op = r.enumerator<ReduceOp>("Response.reduce_op", kNumReduceOps);
  p.device.kind = r.enumerator<Device::Kind>("Response.device.kind", kNumDeviceKinds);
  p.device.index = r.i32("Response.device.index");
  p.shape = r.ints<int64_t>("Response.shape");
  p.root = r.i32("Response.root");
  p.prescale = r.f64("Response.prescale");
  p.postscale = r.f64("Response.postscale");
  p.first_dims = r.ints<int64_t>("Response.first_dims");
  p.splits = r.ints<int64_t>("Response.splits");
  p.group_size = r.i32("Response.group_size");
  p.group_index = r.i32("Response.group_index");
  p.group = r.str("Response.group");
  p.last_joined_rank = r.i32("Response.last_joined_rank");
  p.new_set_id = r.i32("Response.new_set_id");
  p.ranks = r.ints<int32_t>("Response.ranks");
  p.target_set = r.i32("Response.target_set");
  return p;
}

// Reads a counted sequence of elements. The count was checked against the bytes left, so
// reserve() is bounded by the message size; the loop stops at the first fault.
template <class T, class ReadOne>
std::vector<T> read_list(Reader& r, const char* what, std::size_t min_bytes, ReadOne read_one) {
  std::vector<T> out;
  const uint32_t n = r.length(what, min_bytes);
  out.reserve(n);
  for (uint32_t i = 0; i < n && r.ok(); ++i) out.push_back(read_one(r));
  return out;
}

}  // namespace

std::string encode(const RequestList& list) {
  Writer w;
  write_header(w, MessageKind::kRequestList);
  w.length(list.requests.size());
  for (const Request& q : list.requests) write_request(w, q);
  w.length(list.waiting.size());
  for (const WaitingSlot& s : list.waiting) {
    w.i32(s.slot);
    w.f64(s.waited_seconds);
  }
  w.f64(list.idle_seconds);
  return std::move(w).take();
}

std::string encode(const ResponseList& list) {
  Writer w;
  write_header(w, MessageKind::kResponseList);
  w.length(list.responses.size());
  for (const Response& p : list.responses) write_response(w, p);
  w.length(list.stall_lines.size());
  for (const std::string& line : list.stall_lines) w.str(line);
  w.i32(list.stall_exit_status);
  return std::move(w).take();
}

StatusOr<RequestList> decode_request_list(std::string_view bytes) {
  Reader r(bytes);
  read_header(r, MessageKind::kRequestList);
  RequestList list;
  list.requests = read_list<Request>(r, "RequestList.requests", kMinRequestBytes, read_request);
  list.waiting =
      read_list<WaitingSlot>(r, "RequestList.waiting", kMinWaitingSlotBytes, [](Reader& rr) {
        // A braced list evaluates its elements left to right, as the reads require.
        return WaitingSlot{rr.i32("WaitingSlot.slot"), rr.f64("WaitingSlot.waited_seconds")};
      });
  list.idle_seconds = r.f64("RequestList.idle_seconds");
  r.expect_end(kind_name(static_cast<uint8_t>(MessageKind::kRequestList)));
  if (!r.ok()) return r.status();
  return list;
}

StatusOr<ResponseList> decode_response_list(std::string_view bytes) {
  Reader r(bytes);
  read_header(r, MessageKind::kResponseList);
  ResponseList list;
  list.responses =
      read_list<Response>(r, "ResponseList.responses", kMinResponseBytes, read_response);
  list.stall_lines = read_list<std::string>(r, "ResponseList.stall_lines", kMinStringBytes,
                                            [](Reader& rr) { return rr.str("stall line"); });
  list.stall_exit_status = r.i32("ResponseList.stall_exit_status");
  r.expect_end(kind_name(static_cast<uint8_t>(MessageKind::kResponseList)));
  if (!r.ok()) return r.status();
  return list;
}

}  // namespace chorus::codec
