// Unit tests of the wire codec (src/core/codec.h) and the message helpers it relies on.
#include "core/codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "protocol/message.h"

namespace chorus::codec {
namespace {

using namespace std::string_literals;

// Byte offsets in a message holding exactly one element whose strings are all empty; they
// follow from the layout in codec.h (header 7 bytes, then a uint32 count).
constexpr std::size_t kCountAt = 7;
constexpr std::size_t kFirstElementAt = 11;

Request full_request(int i) {
  Request q;
  q.rank = 3 + i;
  q.op = static_cast<OpType>(i % kNumOpTypes);
  q.name = "model.layer" + std::to_string(i) + ".weight";
  q.dtype = DataType::kBFloat16;
  q.reduce_op = ReduceOp::kAverage;
  q.device = Device::cuda(i);
  q.shape = {7, 1 + i, 3};
  q.root = 2;
  q.prescale = 0.5;
  q.postscale = 0.125 * i;
  q.splits = {1, 2, -3, std::numeric_limits<int64_t>::max()};
  q.group = "group-" + std::to_string(i);
  q.group_size = 4;
  q.group_index = i % 4;
  q.ranks = {0, 2, std::numeric_limits<int32_t>::min()};
  q.target_set = 9;
  return q;
}

Response full_response(int i) {
  Response p;
  p.op = static_cast<OpType>((i + 1) % kNumOpTypes);
  p.name = "grad/" + std::to_string(i);
  p.dtype = DataType::kFloat64;
  p.reduce_op = ReduceOp::kMax;
  p.device = Device::cuda(7);
  p.shape = {128, 64};
  p.root = 1;
  p.prescale = 2.0;
  p.postscale = -0.25;
  p.first_dims = {3, 4, 5};
  p.splits = {0, 1, 1, 0};
  p.group_size = 2;
  p.group_index = 1;
  p.group = "g";
  p.last_joined_rank = 42;
  p.new_set_id = 7;
  p.ranks = {1, 3};
  p.target_set = 5;
  return p;
}

RequestList full_request_list() {
  RequestList list;
  for (int i = 0; i < 4; ++i) list.requests.push_back(full_request(i));
  list.waiting = {{5, 1.5}, {-1, 0.0}, {1 << 30, 1e300}};
  list.idle_seconds = 12.25;
  return list;
}

ResponseList full_response_list() {
  ResponseList list;
  for (int i = 0; i < 3; ++i) list.responses.push_back(full_response(i));
  list.responses[1].status =
      Status(StatusCode::kMismatch, "allreduce 'w': rank 1 sent float32[3], rank 0 float32[4]");
  list.stall_lines = {"stall: ranks stopped taking part (1 tensor: 'w'): ...", ""};
  list.stall_exit_status = 84;
  return list;
}

// Asserts that `result` failed as a malformed message should, and returns its message.
template <class T>
std::string expect_data_loss(const StatusOr<T>& result) {
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kDataLoss) << result.status().to_string();
  EXPECT_EQ(result.status().message().rfind("wire message: ", 0), 0u) << result.status().message();
  return result.status().message();
}

std::string patch_u32(std::string bytes, std::size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>(v >> (8 * i));
  return bytes;
}

TEST(MessageTest, OpTypeNames) {
  const char* expected[] = {"allreduce",
                            "allgather",
                            "broadcast",
                            "alltoall",
                            "reducescatter",
                            "barrier",
                            "join",
                            "add_process_set",
                            "remove_process_set",
                            "reduce",
                            "add_process_set_of_members"};
  static_assert(std::size(expected) == kNumOpTypes, "a name for every op");
  for (int i = 0; i < kNumOpTypes; ++i) {
    EXPECT_STREQ(op_type_name(static_cast<OpType>(i)), expected[i]);
  }
}

TEST(MessageTest, ShapeHelpers) {
  EXPECT_EQ(num_elements({}), 1);
  EXPECT_EQ(num_elements({3, 4}), 12);
  EXPECT_EQ(num_elements({5, 0, 2}), 0);
  EXPECT_EQ(shape_string({}), "[]");
  EXPECT_EQ(shape_string({3, 4}), "[3,4]");
  EXPECT_EQ(shape_string({-1}), "[-1]");
}

// operator== must look at every field: a field it skipped would let the codec drop it
// unnoticed by every round-trip test below.
TEST(MessageTest, ResponseEqualityComparesEveryField) {
  const Response base = full_response(0);
  EXPECT_EQ(base, full_response(0));
  const std::vector<std::function<void(Response&)>> changes = {
      [](Response& p) { p.op = OpType::kBarrier; },
      [](Response& p) { p.name += "x"; },
      [](Response& p) { p.status = Status(StatusCode::kAborted, ""); },
      [](Response& p) { p.status = Status(StatusCode::kOk, "same code, other words"); },
      [](Response& p) { p.dtype = DataType::kInt8; },
      [](Response& p) { p.reduce_op = ReduceOp::kMin; },
      [](Response& p) { p.device = Device::cpu(); },
      [](Response& p) { p.shape.push_back(1); },
      [](Response& p) { p.root = 0; },
      [](Response& p) { p.prescale = 3.0; },
      [](Response& p) { p.postscale = 3.0; },
      [](Response& p) { p.first_dims.clear(); },
      [](Response& p) { p.splits[0] = 9; },
      [](Response& p) { p.group_size = 0; },
      [](Response& p) { p.group_index = 0; },
      [](Response& p) { p.group = "h"; },
      [](Response& p) { p.last_joined_rank = -1; },
      [](Response& p) { p.new_set_id = -1; },
      [](Response& p) { p.ranks = {1}; },
      [](Response& p) { p.target_set = 0; },
  };
  for (std::size_t i = 0; i < changes.size(); ++i) {
    Response changed = base;
    changes[i](changed);
    EXPECT_FALSE(changed == base) << "change " << i;
  }
}

TEST(CodecTest, RoundTripsFullRequestList) {
  const RequestList list = full_request_list();
  const auto decoded = decode_request_list(encode(list));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, list);
}

TEST(CodecTest, RoundTripsFullResponseList) {
  const ResponseList list = full_response_list();
  const auto decoded = decode_response_list(encode(list));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, list);
  EXPECT_EQ(decoded->responses[1].status.code(), StatusCode::kMismatch);
}

TEST(CodecTest, RoundTripsEmptyLists) {
  const auto requests = decode_request_list(encode(RequestList{}));
  ASSERT_TRUE(requests.ok()) << requests.status().to_string();
  EXPECT_EQ(*requests, RequestList{});
  const auto responses = decode_response_list(encode(ResponseList{}));
  ASSERT_TRUE(responses.ok()) << responses.status().to_string();
  EXPECT_EQ(*responses, ResponseList{});
}

TEST(CodecTest, RoundTripsBinaryAndUnicodeStrings) {
  RequestList requests;
  requests.requests.push_back(Request{});
  requests.requests[0].name = "w\0eight\0"s;
  requests.requests[0].group = "градиент/层/🙂";
  ResponseList responses;
  responses.responses.push_back(Response{});
  responses.responses[0].name = "\xff\xfe\x00\x01\x80"s;
  responses.responses[0].status = Status(StatusCode::kInternal, "MPI_Send: \0\n\t"s);
  const auto r1 = decode_request_list(encode(requests));
  ASSERT_TRUE(r1.ok()) << r1.status().to_string();
  EXPECT_EQ(*r1, requests);
  EXPECT_EQ(r1->requests[0].name.size(), 8u);
  const auto r2 = decode_response_list(encode(responses));
  ASSERT_TRUE(r2.ok()) << r2.status().to_string();
  EXPECT_EQ(*r2, responses);
}

TEST(CodecTest, RoundTripsEveryEnumValue) {
  RequestList requests;
  ResponseList responses;
  for (int i = 0; i < 10; ++i) {
    Request q;
    q.op = static_cast<OpType>(i % kNumOpTypes);
    q.dtype = static_cast<DataType>(i % kNumDataTypes);
    q.reduce_op = static_cast<ReduceOp>(i % kNumReduceOps);
    q.device = i % 2 ? Device::cuda(i) : Device::cpu();
    requests.requests.push_back(q);
    Response p;
    p.op = q.op;
    p.dtype = q.dtype;
    p.reduce_op = q.reduce_op;
    p.device = q.device;
    p.status = Status(static_cast<StatusCode>(i), i ? "failed" : "");
    responses.responses.push_back(p);
  }
  const auto r1 = decode_request_list(encode(requests));
  ASSERT_TRUE(r1.ok()) << r1.status().to_string();
  EXPECT_EQ(*r1, requests);
  const auto r2 = decode_response_list(encode(responses));
  ASSERT_TRUE(r2.ok()) << r2.status().to_string();
  EXPECT_EQ(*r2, responses);
}

TEST(CodecTest, KeepsExtremeNumbersBitExact) {
  RequestList list;
  Request q;
  q.rank = std::numeric_limits<int32_t>::min();
  q.root = std::numeric_limits<int32_t>::max();
  q.shape = {std::numeric_limits<int64_t>::min(), -1, 0};
  q.prescale = -0.0;
  q.postscale = std::numeric_limits<double>::quiet_NaN();
  list.requests.push_back(q);
  list.waiting = {{0, std::numeric_limits<double>::infinity()}};
  const std::string bytes = encode(list);
  const auto decoded = decode_request_list(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  const Request& d = decoded->requests[0];
  EXPECT_EQ(d.rank, q.rank);
  EXPECT_EQ(d.root, q.root);
  EXPECT_EQ(d.shape, q.shape);
  EXPECT_TRUE(std::signbit(d.prescale));
  EXPECT_TRUE(std::isnan(d.postscale));  // NaN != NaN, so compare the encodings instead
  EXPECT_EQ(encode(*decoded), bytes);
  EXPECT_EQ(decoded->waiting, list.waiting);
}

// Pins the layout: a change here is a wire format change and needs a new kWireVersion.
TEST(CodecTest, LayoutIsLittleEndianAndFixed) {
  RequestList list;
  list.waiting = {{0x01020304, 1.0}};
  list.idle_seconds = 2.0;
  const std::string expected =
      "CHRS\x04\x00\x01"s                   // magic, version 4, request list
      "\x00\x00\x00\x00"s                   // no requests
      "\x01\x00\x00\x00"s                   // one waiting slot
      "\x04\x03\x02\x01"s                   // slot
      "\x00\x00\x00\x00\x00\x00\xf0\x3f"s   // 1.0
      "\x00\x00\x00\x00\x00\x00\x00\x40"s;  // idle 2.0
  EXPECT_EQ(encode(list), expected);
  ResponseList responses;
  responses.stall_lines = {"ab"};
  responses.stall_exit_status = 0x51;
  EXPECT_EQ(encode(responses),
            "CHRS\x04\x00\x02"s  // magic, version 4, response list
            "\x00\x00\x00\x00"s  // no responses
            "\x01\x00\x00\x00\x02\x00\x00\x00"s
            "ab"s                  // one stall line, "ab"
            "\x51\x00\x00\x00"s);  // exit status 81
  // Smallest elements: the decoder's count checks rely on these sizes.
  EXPECT_EQ(encode(RequestList{{Request{}}, {}}).size(), 7u + 4 + 64 + 4 + 8);
  EXPECT_EQ(encode(ResponseList{{Response{}}}).size(), 7u + 4 + 77 + 4 + 4);
}

TEST(CodecTest, EveryTruncationFailsCleanly) {
  const std::string requests = encode(full_request_list());
  for (std::size_t n = 0; n < requests.size(); ++n) {
    const std::string message = expect_data_loss(decode_request_list(requests.substr(0, n)));
    EXPECT_NE(message.find("offset"), std::string::npos) << message;
  }
  const std::string responses = encode(full_response_list());
  for (std::size_t n = 0; n < responses.size(); ++n) {
    const std::string message = expect_data_loss(decode_response_list(responses.substr(0, n)));
    EXPECT_NE(message.find("offset"), std::string::npos) << message;
  }
  EXPECT_NE(expect_data_loss(decode_request_list("")).find("truncated at offset 0 reading magic"),
            std::string::npos);
}

TEST(CodecTest, RejectsBadMagic) {
  std::string bytes = encode(full_request_list());
  bytes[3] = 'T';
  const std::string message = expect_data_loss(decode_request_list(bytes));
  EXPECT_NE(message.find("bad magic"), std::string::npos) << message;
  EXPECT_NE(message.find("offset 0"), std::string::npos) << message;
}

TEST(CodecTest, RejectsOtherVersions) {
  for (uint16_t version : {0, 1, 2, 3, 5, 0xffff}) {  // 3: before the stall classes
    std::string bytes = encode(full_response_list());
    bytes[4] = static_cast<char>(version & 0xff);
    bytes[5] = static_cast<char>(version >> 8);
    const std::string message = expect_data_loss(decode_response_list(bytes));
    EXPECT_NE(
        message.find("unsupported format version " + std::to_string(version) + " at offset 4"),
        std::string::npos)
        << message;
  }
}

TEST(CodecTest, RejectsWrongKind) {
  const std::string m1 = expect_data_loss(decode_request_list(encode(full_response_list())));
  EXPECT_NE(m1.find("message kind 2 (response list) at offset 6"), std::string::npos) << m1;
  const std::string m2 = expect_data_loss(decode_response_list(encode(full_request_list())));
  EXPECT_NE(m2.find("message kind 1 (request list) at offset 6"), std::string::npos) << m2;
  for (char kind : {'\x00', '\x03', '\xff'}) {
    std::string bytes = encode(RequestList{});
    bytes[6] = kind;
    const std::string m = expect_data_loss(decode_request_list(bytes));
    EXPECT_NE(m.find("(unknown) at offset 6"), std::string::npos) << m;
  }
}

struct EnumField {
  std::size_t offset;
  int count;  // first invalid value
  const char* name;
};

// A request's enumerations pass through undecided: a value this build does not know fails
// that collective in the coordinator (decide_response_test), not the whole request list.
TEST(CodecTest, PassesUnknownRequestEnumsThrough) {
  const std::string valid = encode(RequestList{{Request{}}, {}});
  const EnumField fields[] = {{kFirstElementAt + 4, kNumOpTypes, "Request.op"},
                              {kFirstElementAt + 9, kNumDataTypes, "Request.dtype"},
                              {kFirstElementAt + 10, kNumReduceOps, "Request.reduce_op"},
                              {kFirstElementAt + 11, 2, "Request.device.kind"}};
  for (const EnumField& f : fields) {
    for (int bad : {f.count, 255}) {
      std::string bytes = valid;
      bytes[f.offset] = static_cast<char>(bad);
      StatusOr<RequestList> got = decode_request_list(bytes);
      ASSERT_TRUE(got.ok()) << f.name << ": " << got.status().to_string();
      ASSERT_EQ(got->requests.size(), 1u);
      EXPECT_FALSE(check_request(got->requests[0]).ok()) << f.name << " " << bad;
      // Everything after the field still decodes in place.
      EXPECT_EQ(encode(*got), bytes) << f.name;
    }
  }
}

TEST(CodecTest, RejectsOutOfRangeResponseEnums) {
  const std::string valid = encode(ResponseList{{Response{}}});
  const EnumField fields[] = {{kFirstElementAt, kNumOpTypes, "Response.op"},
                              {kFirstElementAt + 5, 10, "Response.status.code"},
                              {kFirstElementAt + 10, kNumDataTypes, "Response.dtype"},
                              {kFirstElementAt + 11, kNumReduceOps, "Response.reduce_op"},
                              {kFirstElementAt + 12, 2, "Response.device.kind"}};
  for (const EnumField& f : fields) {
    std::string bytes = valid;
    bytes[f.offset] = static_cast<char>(f.count - 1);
    EXPECT_TRUE(decode_response_list(bytes).ok()) << f.name;
    for (int bad : {f.count, 255}) {
      bytes[f.offset] = static_cast<char>(bad);
      const std::string m = expect_data_loss(decode_response_list(bytes));
      EXPECT_NE(m.find(std::string(f.name) + ": value " + std::to_string(bad) + " at offset " +
                       std::to_string(f.offset) + " is out of range"),
                std::string::npos)
          << m;
    }
  }
}

// Forged counts must be refused from the bytes left, before anything is allocated: under
// ASan an attempt to reserve billions of elements would abort the test.
TEST(CodecTest, RejectsHugeLengthPrefixes) {
  const std::string one_request = encode(RequestList{{Request{}}, {}});
  ASSERT_EQ(one_request.size(), 87u);
  const std::string m1 = expect_data_loss(
      decode_request_list(patch_u32(one_request, kFirstElementAt + 5, 4000000000u)));
  EXPECT_NE(m1.find("Request.name: string length 4000000000 at offset 16 exceeds the 67 bytes "
                    "left"),
            std::string::npos)
      << m1;
  const std::string m2 =
      expect_data_loss(decode_request_list(patch_u32(one_request, kCountAt, 0xffffffff)));
  EXPECT_NE(m2.find("RequestList.requests: length 4294967295 at offset 7 needs at least"),
            std::string::npos)
      << m2;
  const std::string m3 =
      expect_data_loss(decode_request_list(patch_u32(one_request, kFirstElementAt + 16, 1u << 31)));
  EXPECT_NE(m3.find("Request.shape: length 2147483648 at offset 27"), std::string::npos) << m3;
  const std::string m4 = expect_data_loss(
      decode_request_list(patch_u32(one_request, one_request.size() - 12, 0xfffffff0)));
  EXPECT_NE(m4.find("RequestList.waiting: length"), std::string::npos) << m4;

  const std::string one_response = encode(ResponseList{{Response{}}});
  const std::string m5 = expect_data_loss(
      decode_response_list(patch_u32(one_response, kFirstElementAt + 6, 0xffffffff)));
  EXPECT_NE(m5.find("Response.status.message: string length 4294967295 at offset 17"),
            std::string::npos)
      << m5;
  const std::string m6 =
      expect_data_loss(decode_response_list(patch_u32(one_response, kCountAt, 2)));
  EXPECT_NE(m6.find("ResponseList.responses: length 2 at offset 7 needs at least 154 bytes but "
                    "85 are left"),
            std::string::npos)
      << m6;
}

TEST(CodecTest, RejectsTrailingBytes) {
  const std::string requests = encode(full_request_list());
  const std::string m1 = expect_data_loss(decode_request_list(requests + "\0"s));
  EXPECT_NE(m1.find("1 trailing bytes at offset " + std::to_string(requests.size())),
            std::string::npos)
      << m1;
  const std::string responses = encode(full_response_list());
  const std::string m2 = expect_data_loss(decode_response_list(responses + responses));
  EXPECT_NE(m2.find("trailing bytes"), std::string::npos) << m2;
}

// Changing any one byte either breaks the message (DATA_LOSS) or yields a value that
// encodes back to exactly the changed bytes: no byte is ignored, none is misread.
TEST(CodecTest, SingleByteChangesFailOrRoundTrip) {
  const std::string requests = encode(full_request_list());
  const std::string responses = encode(full_response_list());
  for (std::size_t i = 0; i < std::max(requests.size(), responses.size()); ++i) {
    for (int delta : {1, 0x80, 0xff}) {
      if (i < requests.size()) {
        std::string bytes = requests;
        bytes[i] = static_cast<char>(static_cast<unsigned char>(bytes[i]) ^ delta);
        const auto decoded = decode_request_list(bytes);
        if (decoded.ok()) {
          EXPECT_EQ(encode(*decoded), bytes) << "byte " << i;
        } else {
          EXPECT_EQ(decoded.status().code(), StatusCode::kDataLoss);
        }
      }
      if (i < responses.size()) {
        std::string bytes = responses;
        bytes[i] = static_cast<char>(static_cast<unsigned char>(bytes[i]) ^ delta);
        const auto decoded = decode_response_list(bytes);
        if (decoded.ok()) {
          EXPECT_EQ(encode(*decoded), bytes) << "byte " << i;
        } else {
          EXPECT_EQ(decoded.status().code(), StatusCode::kDataLoss);
        }
      }
    }
  }
}

}  // namespace
}  // namespace chorus::codec
