#include "kernels_src/KernelCatalog.h"

#include <fmt/format.h>

#include "core/Spec.h"
#include "kernels_src/ScoreKernels.h"

namespace m3idx::kernels {

std::string KernelConfig::str() const { return fmt::format("heads={},rows={}", numHeads, queryRows); }

const std::vector<KernelKind> &allKernels() {
  static const std::vector<KernelKind> all = {KernelKind::ScoreDecode, KernelKind::ScorePrefill,
                                              KernelKind::TopkDecode, KernelKind::TopkPrefill,
                                              KernelKind::TopkMerge};
  return all;
}

const char *kernelName(KernelKind k) {
  switch (k) {
  case KernelKind::ScoreDecode: return "score_decode";
  case KernelKind::ScorePrefill: return "score_prefill";
  case KernelKind::TopkDecode: return "topk_decode";
  case KernelKind::TopkPrefill: return "topk_prefill";
  case KernelKind::TopkMerge: return "topk_merge";
  }
  return "?";
}

std::optional<KernelKind> kernelByName(const std::string &name) {
  for (KernelKind k : allKernels())
    if (name == kernelName(k))
      return k;
  return std::nullopt;
}

int prefillColumnsFor(const std::string &target) {
  return target == "sm_90" ? kSm90PrefillColumns : kPrefillColumns;
}

KernelConfig configFor(KernelKind k, int numHeads, int decodeQueryLen, int prefillColumns) {
  switch (k) {
  case KernelKind::ScoreDecode: return {numHeads, decodeQueryLen};
  case KernelKind::ScorePrefill: return {numHeads, prefillRowTile(numHeads, prefillColumns)};
  case KernelKind::TopkDecode: return {1, decodeQueryLen}; // heads come from the grid
  case KernelKind::TopkPrefill: return {1, 0};
  case KernelKind::TopkMerge: return {1, 0};
  }
  return {};
}

StatusOr<dsl::Kernel> buildKernel(KernelKind k, const KernelConfig &c) {
  if (!spec::isSupportedHeadCount(c.numHeads))
    return invalidArgument("heads", "1, 2 or 4", c.numHeads);
  if (k != KernelKind::TopkPrefill && k != KernelKind::TopkMerge && (c.queryRows < 1 || c.queryRows > 64))
    return invalidArgument("query rows", "1..64", c.queryRows);
  switch (k) {
  case KernelKind::ScoreDecode: return buildScoreDecode(c);
  case KernelKind::ScorePrefill: return buildScorePrefill(c);
  case KernelKind::TopkDecode: return buildTopkDecode(c);
  case KernelKind::TopkPrefill: return buildTopkPrefill(c);
  case KernelKind::TopkMerge: return buildTopkMerge(c);
  }
  return Status::error("unknown kernel");
}

} // namespace m3idx::kernels
