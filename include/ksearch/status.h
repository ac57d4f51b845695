// Status and StatusOr<T>: how every recoverable error of ksearch is reported.
//
// No exception crosses the public API. A function that can fail returns a
// [[nodiscard]] Status (or StatusOr<T> when it also produces a value); the code
// tells the caller whether trying again may help (IsRetryable), the message
// names the failing call and the offending input (file, field, value).
//
// A *candidate* that fails (does not compile, computes the wrong answer, crashes
// the GPU) is not an error: it is an Evaluation with a status (evaluation.h).
//
// Thread safety: Status and StatusOr are values; distinct objects are safe to
// use from different threads, a shared object only for reading.
#ifndef KSEARCH_STATUS_H_
#define KSEARCH_STATUS_H_

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ksearch {

// The canonical codes (same meaning as absl::StatusCode). Success is zero.
enum class StatusCode {
  kOk = 0,
  kCancelled = 1,           // the caller (or SIGINT) asked to stop
  kUnknown = 2,             // an error that fits no other code
  kInvalidArgument = 3,     // bad input: a file, a field, a value; do not retry
  kDeadlineExceeded = 4,    // a time limit passed; retrying may help
  kNotFound = 5,            // a file, problem, run or cache entry is missing
  kAlreadyExists = 6,       // creating something that exists
  kPermissionDenied = 7,    // the OS or a server refused access
  kResourceExhausted = 8,   // rate limit, quota, disk or device memory; retry later
  kFailedPrecondition = 9,  // the system is not in a state to do this (no GPU, …)
  kAborted = 10,            // a concurrency conflict; retry the whole operation
  kOutOfRange = 11,         // a value past a valid range (an index, an overflow)
  kUnimplemented = 12,      // not supported by this build or provider
  kInternal = 13,           // a broken invariant inside ksearch or a library
  kUnavailable = 14,        // a server or device is transiently unreachable; retry
  kDataLoss = 15,           // corrupt or truncated data (a database, a frame)
  kUnauthenticated = 16,    // missing or wrong credentials
};

// "OK", "INVALID_ARGUMENT", …
std::string_view ToString(StatusCode code);

class [[nodiscard]] Status {
 public:
  // An OK status.
  Status() = default;
  // `message` should name the failing call or the bad input. A non-OK code with
  // an empty message is allowed but unhelpful.
  Status(StatusCode code, std::string message)
      : code_(code), message_(code == StatusCode::kOk ? std::string() : std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // True for codes where the same request may succeed later: kUnavailable,
  // kResourceExhausted, kDeadlineExceeded, kAborted.
  bool IsRetryable() const;

  // "OK" or "INVALID_ARGUMENT: problem.json: dims.rows: expected a positive integer, got -4".
  std::string ToString() const;

  // Returns a copy whose message is `prefix + ": " + message()`. Used to add
  // context (a file name, a candidate id) while an error travels up.
  Status WithContext(std::string_view prefix) const;

  // Marks a status as intentionally dropped.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status CancelledError(std::string message);
Status UnknownError(std::string message);
Status InvalidArgumentError(std::string message);
Status DeadlineExceededError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status PermissionDeniedError(std::string message);
Status ResourceExhaustedError(std::string message);
Status FailedPreconditionError(std::string message);
Status AbortedError(std::string message);
Status OutOfRangeError(std::string message);
Status UnimplementedError(std::string message);
Status InternalError(std::string message);
Status UnavailableError(std::string message);
Status DataLossError(std::string message);
Status UnauthenticatedError(std::string message);

namespace internal {
// Writes "StatusOr::value() on an error: <status>" to stderr and aborts.
[[noreturn]] void DieOfValueOnError(const Status& status);
}  // namespace internal

// Either a value of type T or a non-OK Status. Constructing a StatusOr from an
// OK Status is a programming error; it is turned into kInternal.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const T& value) : data_(value) {}  // NOLINT: implicit by design
  StatusOr(T&& value) : data_(std::move(value)) {}  // NOLINT
  StatusOr(Status status)  // NOLINT
      : data_(status.ok() ? InternalError("StatusOr constructed from an OK status")
                          : std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(data_); }
  // The error, or an OK status when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(data_); }

  // Precondition: ok(). Asking an error for its value is a bug in the
  // caller, like a broken invariant: the process aborts with the error on
  // stderr ("StatusOr::value() on an error: NOT_FOUND: …"). No exception is
  // thrown (none crosses the public API); test ok() first, or use value_or.
  T& value() & { return *Checked(); }
  const T& value() const& { return *Checked(); }
  T&& value() && { return std::move(*Checked()); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The value, or `fallback` when this holds an error.
  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  T* Checked() {
    if (T* value = std::get_if<T>(&data_)) return value;
    internal::DieOfValueOnError(*std::get_if<Status>(&data_));
  }
  const T* Checked() const {
    if (const T* value = std::get_if<T>(&data_)) return value;
    internal::DieOfValueOnError(*std::get_if<Status>(&data_));
  }

  std::variant<Status, T> data_;
};

}  // namespace ksearch

// Returns early from the enclosing function when `expr` (a Status) is not OK.
#define KSEARCH_RETURN_IF_ERROR(expr)                    \
  do {                                                   \
    ::ksearch::Status ksearch_status_ = (expr);          \
    if (!ksearch_status_.ok()) return ksearch_status_;   \
  } while (0)

#define KSEARCH_CONCAT_INNER_(a, b) a##b
#define KSEARCH_CONCAT_(a, b) KSEARCH_CONCAT_INNER_(a, b)
// `KSEARCH_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a StatusOr or
// returns its error.
#define KSEARCH_ASSIGN_OR_RETURN(lhs, expr) \
  KSEARCH_ASSIGN_OR_RETURN_IMPL_(KSEARCH_CONCAT_(ksearch_statusor_, __LINE__), lhs, expr)
#define KSEARCH_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#endif  // KSEARCH_STATUS_H_
