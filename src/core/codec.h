#pragma once
// The wire codec of negotiation messages: RequestList and ResponseList to bytes and back.
//
// Layout (version 1). Every integer is little-endian and fixed width, whatever the host:
//
//   header   "CHRS" (4 bytes) | uint16 version (kWireVersion) | uint8 MessageKind
//   body     RequestList  = vec<Request> requests, vec<WaitingSlot> waiting
//            ResponseList = vec<Response> responses
//   string   uint32 byte count, then the bytes (any bytes, NUL included; no terminator)
//   vec<T>   uint32 element count, then the elements
//   enums    uint8 (OpType, DataType, ReduceOp, Device::Kind, StatusCode)
//   int32    two's complement; double: the IEEE-754 bit pattern as uint64 (NaN kept bit-exact)
//
// The fields of Request, WaitingSlot and Response follow in the order message.h declares
// them; a Status is its code (uint8) then its message (string). There are no optional
// fields and no padding, so each value has exactly one encoding: encode(decode(b)) == b.
//
// Any change to this layout must bump kWireVersion; ranks built from different versions
// then fail negotiation with a clear DATA_LOSS error instead of misreading each other.
//
// Thread safety: every function here is pure and may be called from any thread.

#include <cstdint>
#include <string>
#include <string_view>

#include "chorus/status.h"
#include "protocol/message.h"

namespace chorus::codec {

/// The first four bytes of every message.
inline constexpr std::string_view kMagic = "CHRS";
/// The layout version this build writes and the only one it reads.
inline constexpr uint16_t kWireVersion = 4;

/// What the body of a message holds (the header's third field).
enum class MessageKind : uint8_t {
  kRequestList = 1,
  kResponseList = 2,
};

/// Encodes a list. Precondition: no string or vector holds 2^32 or more elements (real
/// messages are many orders of magnitude smaller); a violation aborts, as it is a bug.
std::string encode(const RequestList& list);
std::string encode(const ResponseList& list);

/// Decodes one complete message. `bytes` may come from any rank, or be corrupt, so nothing
/// is trusted: every length is checked against the bytes left before anything is allocated,
/// every enum against its range, and trailing bytes are an error. Any failure returns
/// StatusCode::kDataLoss with a message that names the field and its byte offset. Decoding
/// checks form only; whether the values make sense (e.g. agree across ranks, or non-negative
/// dimensions) is the coordinator's job.
StatusOr<RequestList> decode_request_list(std::string_view bytes);
StatusOr<ResponseList> decode_response_list(std::string_view bytes);

}  // namespace chorus::codec
