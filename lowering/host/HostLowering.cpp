// The host's side of the DSL -> MLIR step (lowering/TargetLowering.h): whole tiles per program
// (host/HostTiles.cpp), the NVFP4 decode in target-neutral arith, loops as the kernel wrote them
// (unrolling the score loop made the host's code larger and slower: bench/RESULTS.md).
#include "lowering/EmitterImpl.h"

namespace m3idx::lowering {

namespace {

class HostLowering final : public TargetLowering {
public:
  const char *name() const override { return "host"; }
  bool distributed() const override { return false; }
};

} // namespace

const TargetLowering &hostLowering() {
  static const HostLowering lowering;
  return lowering;
}

} // namespace m3idx::lowering
