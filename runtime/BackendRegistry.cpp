#include <fmt/format.h>

#include "reference/ReferenceIndexer.h"
#include "runtime/Backend.h"
#include "runtime/HostBackend.h"

namespace m3idx::runtime {

namespace {

class ReferenceBackend final : public Backend {
public:
  std::string name() const override { return "ref"; }
  StatusOr<IndexerOutput> run(const BatchView &batch, const RunOptions &options) override {
    return reference::runReference(batch, options.keepScores);
  }
};

} // namespace

std::vector<std::string> backendNames() { return {"ref", "host"}; }

StatusOr<std::unique_ptr<Backend>> makeBackend(const std::string &name) {
  if (name == "ref")
    return std::unique_ptr<Backend>(std::make_unique<ReferenceBackend>());
  if (name == "host")
    return std::unique_ptr<Backend>(std::make_unique<HostBackend>());
  return invalidArgument("--backend", fmt::format("one of {}", fmt::join(backendNames(), ", ")),
                         "'" + name + "'");
}

} // namespace m3idx::runtime
