// A compilation target as data (Triton's BaseBackend in role): what it is, its MLIR pass pipeline
// as an ordered list (printed into dumps so a failure replays with mlir-opt), and a fingerprint
// for cache keys. Three targets implement it: host, gfx950 and sm_90.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/Status.h"

namespace m3idx::lowering {

enum class BinaryKind { HostJit, Hsaco, Ptx, Cubin };

class TargetLowering; // lowering/TargetLowering.h (internal: it speaks MLIR)

// How a GPU target runs a program: one warp / wavefront of `threads` threads, and the target's
// side of the DSL -> MLIR step (its instructions for dots and decodes, shuffles, register budget).
struct GpuForm {
  int threads = 32;
  const TargetLowering *lowering = nullptr;
};

struct TargetDesc {
  std::string kind;     // "host", "gfx950", "sm_90"
  std::string arch;     // CPU name or chip
  std::string features; // full feature string
  int waveSize = 1;     // lanes that execute together (1 on the host)
};

class Target {
public:
  virtual ~Target() = default;
  virtual const TargetDesc &desc() const = 0;
  virtual std::vector<std::string> pipeline() const = 0;
  virtual BinaryKind binaryKind() const = 0;
  // GPU targets: the form their programs take (the host's is unused).
  virtual GpuForm gpuForm() const { return {}; }
  // GPU targets: the serialized object the pipeline made, as the runtime loads it (gfx950 links its
  // assembled ISA into a code object; sm_90 takes the PTX as it is).
  virtual StatusOr<std::string> finishObject(std::string object) const { return object; }

  // "pass1,pass2,..." as parsePassPipeline and `mlir-opt --pass-pipeline='builtin.module(...)'`
  // take it.
  std::string pipelineText() const;
  std::string fingerprint() const;
};

// The CPU this process runs on (LLVM's host detection), lowered through LLVM's ORC JIT.
std::unique_ptr<Target> makeHostTarget();
// NVIDIA Hopper: gpu + nvvm dialects to PTX (lowering/nvvm/).
std::unique_ptr<Target> makeSm90Target();
// AMD gfx950: gpu + rocdl dialects to ISA, assembled and linked in process (lowering/rocdl/).
std::unique_ptr<Target> makeGfx950Target();
// The target of that name (tuning::TargetInfo's names; an unknown one is an error naming it).
StatusOr<std::unique_ptr<Target>> makeTarget(std::string_view name);

} // namespace m3idx::lowering
