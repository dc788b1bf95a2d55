#include "lowering/Target.h"

#include <fmt/format.h>

namespace m3idx::lowering {

std::string Target::pipelineText() const { return fmt::format("{}", fmt::join(pipeline(), ",")); }

std::string Target::fingerprint() const {
  const TargetDesc &d = desc();
  return fmt::format("kind={};arch={};features={};wave={};pipeline={}", d.kind, d.arch, d.features,
                     d.waveSize, pipelineText());
}

} // namespace m3idx::lowering
