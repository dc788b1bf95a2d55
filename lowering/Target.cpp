#include "lowering/Target.h"

#include <fmt/format.h>

namespace m3idx::lowering {

StatusOr<std::unique_ptr<Target>> makeTarget(std::string_view name) {
  if (name == "host")
    return makeHostTarget();
  if (name == "sm_90")
    return makeSm90Target();
  if (name == "gfx950")
    return makeGfx950Target();
  return Status::error(fmt::format("no lowering target named '{}'", name));
}

std::string Target::pipelineText() const { return fmt::format("{}", fmt::join(pipeline(), ",")); }

std::string Target::fingerprint() const {
  const TargetDesc &d = desc();
  return fmt::format("kind={};arch={};features={};wave={};pipeline={}", d.kind, d.arch, d.features,
                     d.waveSize, pipelineText());
}

} // namespace m3idx::lowering
