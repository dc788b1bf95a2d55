#include "runtime/gpu/DeviceApi.h"

namespace m3idx::runtime {

Status DeviceApi::check(int code, const char *call) const {
  if (code == 0)
    return Status();
  const char *text = errorString ? errorString(code) : nullptr;
  const std::string why = explainError ? explainError(code) : std::string();
  return Status::error(fmt::format("{} {} failed: {} (code {}){}", platform, call, text ? text : "unknown error",
                                   code, why.empty() ? "" : ": " + why));
}

} // namespace m3idx::runtime
