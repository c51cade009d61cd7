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

// A string's smallest encoding: its length, 4.
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

  // One field of a message, by its type.
  void put(int32_t v) { i32(v); }
  void put(double v) { f64(v); }
  void put(const std::string& v) { str(v); }
  template <class T>
  void put(const std::vector<T>& v) {
    ints(v);
  }
  template <class E>
  requires std::is_enum_v<E>
  void put(E v) { enumerator(v); }
  void put(const Device& d) {
    enumerator(d.kind);
    i32(d.index);
  }
  void put(const Status& s) {
    enumerator(s.code());
    str(s.message());
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

// How many values of each enumeration this build knows: a response's fields must be below.
template <class E>
constexpr int enum_count() {
  if constexpr (std::is_same_v<E, OpType>) return kNumOpTypes;
  if constexpr (std::is_same_v<E, DataType>) return kNumDataTypes;
  if constexpr (std::is_same_v<E, ReduceOp>) return kNumReduceOps;
  if constexpr (std::is_same_v<E, StatusCode>) return kNumStatusCodes;
  if constexpr (std::is_same_v<E, Device::Kind>) return kNumDeviceKinds;
}

// A field's names in error messages, "Request.rank", and for the two-part fields
// "Request.device.kind" and "Request.device.index" (a Status: ".code", ".message").
struct FieldNames {
  std::string first;
  std::string second;
};
template <class T>
FieldNames names_of(const std::string& base) {
  if constexpr (std::is_same_v<T, Device>) return {base + ".kind", base + ".index"};
  if constexpr (std::is_same_v<T, Status>) return {base + ".code", base + ".message"};
  return {base, {}};
}

// Reads one field of type T. A request's enumerations are taken as they come (`checked`
// false): a value this build does not know (a peer built otherwise) fails that collective
// on every rank (check_request, in the coordinator's decision), not the whole message. A
// response's must be below their count.
struct FieldReader {
  Reader& r;
  bool checked;

  void get(int32_t& v, const FieldNames& n) { v = r.i32(n.first.c_str()); }
  void get(double& v, const FieldNames& n) { v = r.f64(n.first.c_str()); }
  void get(std::string& v, const FieldNames& n) { v = r.str(n.first.c_str()); }
  template <class T>
  void get(std::vector<T>& v, const FieldNames& n) {
    v = r.ints<T>(n.first.c_str());
  }
  template <class E>
  requires std::is_enum_v<E>
  void get(E& v, const FieldNames& n) { v = enumerator<E>(n.first.c_str()); }
  void get(Device& d, const FieldNames& n) {
    d.kind = enumerator<Device::Kind>(n.first.c_str());
    d.index = r.i32(n.second.c_str());
  }
  void get(Status& s, const FieldNames& n) {
    const auto code = r.enumerator<StatusCode>(n.first.c_str(), kNumStatusCodes);
    std::string message = r.str(n.second.c_str());
    s = Status(code, std::move(message));
  }

  template <class E>
  E enumerator(const char* what) {
    if (checked) return r.enumerator<E>(what, enum_count<E>());
    return static_cast<E>(r.u8(what));
  }
};

// Each message's name in errors, and whether its enumerations must hold values this build
// knows (FieldReader's `checked`).
template <class Msg>
struct Wire;
template <>
struct Wire<Request> {
  static constexpr const char* kName = "Request";
  static constexpr bool kChecked = false;
};
template <>
struct Wire<WaitingSlot> {
  static constexpr const char* kName = "WaitingSlot";
  static constexpr bool kChecked = false;
};
template <>
struct Wire<Response> {
  static constexpr const char* kName = "Response";
  static constexpr bool kChecked = true;
};

// A message's field names, made once.
template <class Msg>
const std::vector<FieldNames>& field_names() {
  static const std::vector<FieldNames> names = [] {
    std::vector<FieldNames> out;
    Msg::fields([&](const char* name, auto member) {
      using T = std::remove_cvref_t<decltype(std::declval<Msg&>().*member)>;
      out.push_back(names_of<T>(std::string(Wire<Msg>::kName) + "." + name));
    });
    return out;
  }();
  return names;
}

template <class Msg>
void write(Writer& w, const Msg& m) {
  Msg::fields([&](const char*, auto member) { w.put(m.*member); });
}

template <class Msg>
Msg read(Reader& r) {
  const std::vector<FieldNames>& names = field_names<Msg>();
  FieldReader fields{r, Wire<Msg>::kChecked};
  Msg m;
  std::size_t i = 0;
  Msg::fields([&](const char*, auto member) { fields.get(m.*member, names[i++]); });
  return m;
}

// The smallest encoding of one element (every string and vector empty): a default one's. A
// count prefix is checked against it before any element is decoded, so a forged count can
// neither allocate nor loop beyond what the bytes actually present could hold.
template <class Msg>
std::size_t min_bytes() {
  static const std::size_t size = [] {
    Writer w;
    write(w, Msg{});
    return std::move(w).take().size();
  }();
  return size;
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
  for (const Request& q : list.requests) write(w, q);
  w.length(list.waiting.size());
  for (const WaitingSlot& s : list.waiting) write(w, s);
  w.f64(list.idle_seconds);
  return std::move(w).take();
}

std::string encode(const ResponseList& list) {
  Writer w;
  write_header(w, MessageKind::kResponseList);
  w.length(list.responses.size());
  for (const Response& p : list.responses) write(w, p);
  w.length(list.stall_lines.size());
  for (const std::string& line : list.stall_lines) w.str(line);
  w.i32(list.stall_exit_status);
  return std::move(w).take();
}

StatusOr<RequestList> decode_request_list(std::string_view bytes) {
  Reader r(bytes);
  read_header(r, MessageKind::kRequestList);
  RequestList list;
  list.requests =
      read_list<Request>(r, "RequestList.requests", min_bytes<Request>(), read<Request>);
  list.waiting =
      read_list<WaitingSlot>(r, "RequestList.waiting", min_bytes<WaitingSlot>(), read<WaitingSlot>);
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
      read_list<Response>(r, "ResponseList.responses", min_bytes<Response>(), read<Response>);
  list.stall_lines = read_list<std::string>(r, "ResponseList.stall_lines", kMinStringBytes,
                                            [](Reader& rr) { return rr.str("stall line"); });
  list.stall_exit_status = r.i32("ResponseList.stall_exit_status");
  r.expect_end(kind_name(static_cast<uint8_t>(MessageKind::kResponseList)));
  if (!r.ok()) return r.status();
  return list;
}

}  // namespace chorus::codec
