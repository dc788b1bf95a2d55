// Errors as values at m3idx's boundaries: a Status (ok or a one-line message) and StatusOr<T>.
// Public (the C++ API returns them); header-only, with no dependency beyond the standard library.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace m3idx {

class [[nodiscard]] Status {
public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !message_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string &message() const {
    static const std::string kOk = "ok";
    return message_ ? *message_ : kOk;
  }

private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

template <typename T> class [[nodiscard]] StatusOr {
public:
  StatusOr(T value) : v_(std::move(value)) {}
  StatusOr(Status status) : v_(std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  T &value() & { return std::get<T>(v_); }
  T &&value() && { return std::get<T>(std::move(v_)); }
  const T &value() const & { return std::get<T>(v_); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }

private:
  std::variant<T, Status> v_;
};

} // namespace m3idx
