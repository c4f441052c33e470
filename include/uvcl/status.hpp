// uvcl/status.hpp — errors as values.
//
// Contract: no exception crosses the uvcl API. Every fallible call returns a
// Result<T>: either a value or an Error carrying a Status and a message that
// says what went wrong and where ("opencl.window: expected an integer 1..65536,
// got \"x\"", "clBuildProgram: CL_BUILD_PROGRAM_FAILURE ..."). Context is
// prepended as errors travel up (Error::context).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "uvcl/export.h"

namespace uvcl {

enum class Status {
  Ok,
  // zyx's OpenCL backend's set, less what uvcl never produces (a failed free or
  // teardown has no caller left to tell).
  Initialization,
  DyLibNotFound,
  DeviceEnumeration,
  DeviceQuery,
  MemoryAllocation,
  MemoryCopyH2P,
  MemoryCopyP2H,
  KernelCompilation,
  KernelLaunch,
  KernelSync,
  IncorrectKernelArg,
  // What uvcl adds.
  InvalidArgument,  // a bad argument at the API edge (unknown handle, bad size)
  InvalidConfig,    // a config file that does not parse or validate
  InvalidJob,       // a job file that does not parse or validate
  MissingSymbol,    // the OpenCL library lacks an entry point uvcl needs
  DeviceLost,       // the device stopped working; new work on it fails
  Io,               // a file could not be read or written
  Cancelled,        // the engine was destroyed before the operation finished
};

// "MemoryAllocation", "KernelCompilation", ...
UVCL_EXPORT std::string_view status_name(Status s) noexcept;

struct UVCL_EXPORT Error {
  Status status = Status::Ok;
  std::string message;

  // Prepends "what: " to the message; returns *this for chaining.
  Error& context(std::string_view what) {
    message.insert(0, std::string(what) + ": ");
    return *this;
  }
  // "KernelCompilation: clBuildProgram: CL_BUILD_PROGRAM_FAILURE ..."
  std::string to_string() const;
};

inline Error make_error(Status s, std::string message) { return Error{s, std::move(message)}; }

namespace detail {
// value() of an error, or error() of a value: a programming error. Prints
// "uvcl: Result::value() of an error: <Status>: <message>" (or the
// error() case) on stderr and aborts, in every build type.
[[noreturn]] UVCL_EXPORT void bad_result_access(const Error* error) noexcept;
}  // namespace detail

// A value or an Error. Accessing value() of an error (or error() of a
// value) is a programming error: the process aborts, with the error's
// message on stderr, in every build type. Check ok() first.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : error_(std::move(error)) { assert(error_.status != Status::Ok); }  // NOLINT

  bool ok() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { check_value(); return *value_; }
  const T& value() const& { check_value(); return *value_; }
  T&& value() && { check_value(); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const& { check_error(); return error_; }
  Error&& error() && { check_error(); return std::move(error_); }
  Status status() const noexcept { return ok() ? Status::Ok : error_.status; }

  // Adds context to the error (if any) and passes the result on.
  Result&& context(std::string_view what) && {
    if (!ok()) error_.context(what);
    return std::move(*this);
  }

 private:
  void check_value() const noexcept {
    if (!ok()) detail::bad_result_access(&error_);
  }
  void check_error() const noexcept {
    if (ok()) detail::bad_result_access(nullptr);
  }

  std::optional<T> value_;
  Error error_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) { assert(error_.status != Status::Ok); }  // NOLINT

  bool ok() const noexcept { return error_.status == Status::Ok; }
  explicit operator bool() const noexcept { return ok(); }
  const Error& error() const& { check_error(); return error_; }
  Error&& error() && { check_error(); return std::move(error_); }
  Status status() const noexcept { return error_.status; }
  Result&& context(std::string_view what) && {
    if (!ok()) error_.context(what);
    return std::move(*this);
  }

 private:
  void check_error() const noexcept {
    if (ok()) detail::bad_result_access(nullptr);
  }

  Error error_;
};

}  // namespace uvcl

// Propagates an error from an expression returning Result<...>.
#define UVCL_TRY(expr)                                      \
  do {                                                      \
    auto uvcl_try_result_ = (expr);                         \
    if (!uvcl_try_result_.ok()) return std::move(uvcl_try_result_).error(); \
  } while (0)
