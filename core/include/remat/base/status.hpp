#pragma once
// Errors travel as values: every fallible call returns a Status or a Result<T> that the caller must
// look at. No exception crosses the library boundary.
#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace remat {

enum class ErrorCode {
  Ok = 0,
  InvalidInput,  // the user's data is wrong: a chain file, a plan, a shape (CLI exit 2)
  IoError,       // a file could not be read or written (CLI exit 2)
  OutOfMemory,   // a device could not hold what a plan needs
  Cancelled,     // a background job was cancelled
  Internal,      // a bug or an unexpected device failure (CLI exit 1)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  static Status invalid(std::string message) { return {ErrorCode::InvalidInput, std::move(message)}; }
  static Status io(std::string message) { return {ErrorCode::IoError, std::move(message)}; }
  static Status internal(std::string message) { return {ErrorCode::Internal, std::move(message)}; }
  static Status outOfMemory(std::string message) { return {ErrorCode::OutOfMemory, std::move(message)}; }
  static Status cancelled(std::string message = "cancelled") { return {ErrorCode::Cancelled, std::move(message)}; }

  bool isOk() const { return code_ == ErrorCode::Ok; }
  explicit operator bool() const { return isOk(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Adds context in front of the message ("chain.json: " + "layer 3 ...").
  Status withContext(const std::string& context) const {
    if (isOk()) return *this;
    return {code_, context + ": " + message_};
  }

 private:
  ErrorCode code_ = ErrorCode::Ok;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}                                    // NOLINT: implicit on purpose
  Result(Status status) : status_(std::move(status)) { assert(!status_.isOk()); }  // NOLINT

  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status& status() const { return status_; }

  T& value() & {
    assert(isOk());
    return *value_;
  }
  const T& value() const& {
    assert(isOk());
    return *value_;
  }
  T&& value() && {
    assert(isOk());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace remat

// Returns early from the enclosing function when a Status is not ok.
#define REMAT_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    ::remat::Status remat_status_ = (expr);          \
    if (!remat_status_.isOk()) return remat_status_; \
  } while (0)
