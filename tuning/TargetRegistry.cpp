#include "tuning/TargetRegistry.h"

#include <fmt/format.h>

namespace m3idx::tuning {

const std::vector<TargetInfo> &targets() {
  // sm_90 code is PTX (the driver JITs it for the device, or ptxas makes a cubin: GpuCodeCache);
  // the CUDA driver reports sm_90 for every Hopper part. gfx950's HSACO names its chip itself and
  // HIP's loader refuses another.
  static const std::vector<TargetInfo> all = {
      {"host", 1, "jit", "", ""},
      {"sm_90", 32, "ptx", "sm_90", "H100, H200, GH200"},
      {"gfx950", 64, "hsaco", "", "MI350X, MI355X"},
  };
  return all;
}

const TargetTuning &TargetInfo::tuning() const { return **tuningFor(std::string(name)); }

StatusOr<const TargetInfo *> targetNamed(std::string_view name) {
  for (const TargetInfo &t : targets())
    if (t.name == name)
      return &t;
  return invalidArgument("target", targetNameList(), name);
}

std::string targetNameList() {
  const std::vector<TargetInfo> &all = targets();
  std::string s;
  for (size_t i = 0; i < all.size(); ++i)
    s += fmt::format("{}{}", i == 0 ? "" : i + 1 == all.size() ? " or " : ", ", all[i].name);
  return s;
}

} // namespace m3idx::tuning
