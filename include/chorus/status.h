#pragma once
/// \file
/// Status, StatusOr and Error: the one error model of Chorus. Inside the library every
/// fallible function returns Status or StatusOr<T>; exceptions (chorus::Error) appear only
/// at adapter boundaries, carrying the same Status.

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "chorus/export.h"

namespace chorus {

/// Why an operation failed. Stable numbering: the values travel in wire messages.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,     ///< bad input on this rank (dtype, shape, name, variable)
  kMismatch = 2,            ///< ranks disagreed on a collective (dtype, shape, op, root, ...)
  kAborted = 3,             ///< shut down while the work was in flight
  kTimedOut = 4,            ///< Handle::wait ran out of time; the work goes on
  kNotInitialized = 5,      ///< called before init() or after shutdown()
  kFailedPrecondition = 6,  ///< the call is valid but not in the current state
  kInternal = 7,            ///< an MPI/system call failed; the message names it
  kStalled = 8,             ///< failed by the stall inspector: some ranks never submitted
  kDataLoss = 9,            ///< a malformed wire message
};
inline constexpr int kNumStatusCodes = static_cast<int>(StatusCode::kDataLoss) + 1;

/// Name of a code, e.g. "MISMATCH".
CHORUS_API const char* status_code_name(StatusCode code);

/// The result of an operation: ok, or a code with a message that names what is at fault.
class CHORUS_API Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "MISMATCH: allreduce 'w': ..." or "OK".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status failed_precondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}

/// A value or the Status explaining why there is none.
template <class T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

/// Thrown only at adapter boundaries (and by the throwing helpers of this API), carrying
/// the Status that the core produced.
class CHORUS_API Error : public std::runtime_error {
 public:
  explicit Error(Status status)
      : std::runtime_error(status.to_string()), status_(std::move(status)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

}  // namespace chorus
