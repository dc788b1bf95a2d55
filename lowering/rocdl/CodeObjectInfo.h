// What the runtime and `m3idx inspect --emit meta` need from a gfx950 code object, read in-process
// with LLVM's Object library: the target, and per kernel its resources from the AMDGPU metadata note.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/Status.h"

namespace m3idx::lowering {

struct KernelResources {
  std::string name;
  int64_t kernargBytes = 0, vgprs = 0, sgprs = 0, agprs = 0, ldsBytes = 0, scratchBytes = 0;
  int64_t wavefrontSize = 0;
  int64_t wavesPerSimd = 0; // occupancy estimate from VGPRs (512 per lane, 8 waves at most)
};

struct CodeObjectInfo {
  std::string target; // e.g. "amdgcn-amd-amdhsa--gfx950"
  std::vector<KernelResources> kernels;
  std::string metadataYaml; // the whole note, as YAML
};

StatusOr<CodeObjectInfo> readCodeObject(const std::string &bytes);

} // namespace m3idx::lowering
