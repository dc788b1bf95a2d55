// The code targets m3idx builds for, one entry each: what the runtime, the disk cache, AOT bundles
// and the CLI ask of a target by name, so that no second list of targets or target facts exists
// outside it. Its MLIR side (pipeline, binary kind, GPU form) is lowering::Target, made by name
// with lowering::makeTarget (tests/tuning/TargetRegistryTest checks that the two agree); this
// side needs no LLVM, so the GPU backends, which link none, read it too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/Status.h"
#include "tuning/TargetTuning.h"

namespace m3idx::tuning {

struct TargetInfo {
  std::string_view name;         // "host", "sm_90", "gfx950"
  int programThreads = 1;        // threads of a one-warp (one-wave) program; 1 on the host
  std::string_view objectFormat; // a compiled kernel as its loader takes it: "ptx", "hsaco"; "jit" (host)
  std::string_view deviceArch;   // what a device must report to run this code ("": the loader checks)
  std::string_view devices;      // the devices that report it, for errors ("" where none is named)
  bool gpu() const { return programThreads > 1; }
  const TargetTuning &tuning() const; // its table (TargetTuning.cpp)
};

const std::vector<TargetInfo> &targets();
// An unknown name is an error that lists the known ones.
StatusOr<const TargetInfo *> targetNamed(std::string_view name);
// "host, sm_90 or gfx950": the names, for messages.
std::string targetNameList();

} // namespace m3idx::tuning
