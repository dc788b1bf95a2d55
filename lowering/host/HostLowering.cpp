// The host's side of the DSL -> MLIR step (lowering/TargetLowering.h): whole tiles per program
// (host/HostProgram.h), the NVFP4 decode in target-neutral arith, loops as the kernel wrote them
// (unrolling the score loop made the host's code larger and slower: bench/RESULTS.md).
#include "lowering/host/HostProgram.h"

namespace m3idx::lowering {

namespace {

class HostLowering final : public TargetLowering {
public:
  const char *name() const override { return "host"; }
  bool distributed() const override { return false; }
  std::unique_ptr<TargetProgram> program(Emitter &e) const override { return std::make_unique<HostProgram>(e); }
};

} // namespace

const TargetLowering &hostLowering() {
  static const HostLowering lowering;
  return lowering;
}

} // namespace m3idx::lowering
