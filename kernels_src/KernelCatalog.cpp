#include "kernels_src/KernelCatalog.h"

#include <fmt/format.h>

#include "core/Spec.h"
#include "kernels_src/ScoreKernels.h"

namespace m3idx::kernels {

std::string KernelConfig::str() const {
  std::string s = fmt::format("heads={},rows={}", numHeads, queryRows);
  if (tokenTile != kTokenTile || warps != 1)
    s += fmt::format(",tokens={},warps={}", tokenTile, warps);
  if (foldTokenPairs)
    s += ",fold";
  if (blockUnroll != 1)
    s += fmt::format(",unroll={}", blockUnroll);
  if (narrowMask)
    s += ",narrow";
  if (rowTile != 0)
    s += fmt::format(",tile={}", rowTile);
  if (tilesAhead != 1)
    s += fmt::format(",ahead={}", tilesAhead);
  if (keyStages != 0)
    s += fmt::format(",stages={}", keyStages);
  if (fusedTopkTrip != 0)
    s += fmt::format(",topk={}", fusedTopkTrip);
  if (keyImage)
    s += ",image";
  return s;
}

const std::vector<KernelKind> &allKernels() {
  static const std::vector<KernelKind> all = {KernelKind::ScoreDecode, KernelKind::ScorePrefill,
                                              KernelKind::TopkDecode, KernelKind::TopkPrefill,
                                              KernelKind::DecodeKeys};
  return all;
}

const char *kernelName(KernelKind k) {
  switch (k) {
  case KernelKind::ScoreDecode: return "score_decode";
  case KernelKind::ScorePrefill: return "score_prefill";
  case KernelKind::TopkDecode: return "topk_decode";
  case KernelKind::TopkPrefill: return "topk_prefill";
  case KernelKind::DecodeKeys: return "decode_keys";
  }
  return "?";
}

std::optional<KernelKind> kernelByName(const std::string &name) {
  for (KernelKind k : allKernels())
    if (name == kernelName(k))
      return k;
  return std::nullopt;
}

StatusOr<dsl::Kernel> buildKernel(KernelKind k, const KernelConfig &c) {
  if (!spec::isSupportedHeadCount(c.numHeads))
    return invalidArgument("heads", "1, 2 or 4", c.numHeads);
  const int maxRows = k == KernelKind::ScorePrefill ? 128 : 64; // prefill: up to 128 columns at H=1
  if (k != KernelKind::TopkPrefill && (c.queryRows < 1 || c.queryRows > maxRows))
    return invalidArgument("query rows", fmt::format("1..{}", maxRows), c.queryRows);
  if (k == KernelKind::TopkPrefill && (c.queryRows < 1 || c.queryRows > 64 || (c.queryRows & (c.queryRows - 1))))
    return invalidArgument("topk_prefill rows a trip", "a power of two in 1..64", c.queryRows);
  if (c.tokenTile < 1 || spec::kSparseBlockSize % c.tokenTile != 0)
    return invalidArgument("token tile", "a divisor of 128", c.tokenTile);
  const bool score = k == KernelKind::ScoreDecode || k == KernelKind::ScorePrefill;
  if (c.warps < 1 || (c.warps != 1 && !score && k != KernelKind::DecodeKeys))
    return invalidArgument("warps", "1, or more for a score kernel or decode_keys",
                           fmt::format("{} for {}", c.warps, kernelName(k)));
  if (c.foldTokenPairs && (!score || c.tokenTile % 16 != 0))
    return invalidArgument("token-pair folding", "a score kernel with a token tile that is a multiple of 16",
                           fmt::format("{} with a token tile of {}", kernelName(k), c.tokenTile));
  if (c.blockUnroll < 1 || (!score && c.blockUnroll != 1))
    return invalidArgument("block unroll", "1, or more for a score kernel", c.blockUnroll);
  if (c.narrowMask && !score)
    return invalidArgument("narrow masks", "a score kernel", kernelName(k));
  if (c.rowTile != 0 && (k != KernelKind::ScoreDecode || c.rowTile < 1 || c.rowTile == c.queryRows ||
                         c.rowTile > maxRows))
    return invalidArgument("row tile", fmt::format("0, or in [1, {}] and not queryRows for score_decode", maxRows),
                           fmt::format("{} for {} of {} rows", c.rowTile, kernelName(k), c.queryRows));
  const int tilesPerBlock = spec::kSparseBlockSize / c.tokenTile;
  if (c.tilesAhead < 1 || c.tilesAhead > (score ? tilesPerBlock : 1))
    return invalidArgument("tiles ahead", fmt::format("1, or up to a block's {} tiles for a score kernel", tilesPerBlock),
                           fmt::format("{} for {}", c.tilesAhead, kernelName(k)));
  if (c.keyStages != 0 && (k != KernelKind::ScorePrefill || c.keyStages < 2 || c.keyStages > 8))
    return invalidArgument("key stages", "0, or 2 to 8 for score_prefill",
                           fmt::format("{} for {}", c.keyStages, kernelName(k)));
  if (c.keyImage && (k != KernelKind::ScorePrefill || c.keyStages != 0 || c.fusedTopkTrip != 0))
    return invalidArgument("key image", "score_prefill without key stages or a fused top-k",
                           fmt::format("{} with {} stages, a fused top-k of {}", kernelName(k), c.keyStages,
                                       c.fusedTopkTrip));
  if (k == KernelKind::DecodeKeys && (c.tokenTile % 4 != 0 || 8 * c.tokenTile % (32 * c.warps) != 0))
    return invalidArgument("decode_keys token tile", "a multiple of 4 whose scales (8 a token) spread over the warps' threads",
                           fmt::format("{} tokens on {} warps", c.tokenTile, c.warps));
  const int trip = c.fusedTopkTrip;
  if (trip != 0 && (k != KernelKind::ScorePrefill || trip < 1 || trip > 128 || (trip & (trip - 1))))
    return invalidArgument("fused top-k rows a trip", "0, or a power of two in 1..128 for score_prefill",
                           fmt::format("{} for {}", trip, kernelName(k)));
  switch (k) {
  case KernelKind::ScoreDecode: return buildScoreDecode(c);
  case KernelKind::ScorePrefill: return buildScorePrefill(c);
  case KernelKind::TopkDecode: return buildTopkDecode(c);
  case KernelKind::TopkPrefill: return buildTopkPrefill(c);
  case KernelKind::DecodeKeys: return buildDecodeKeys(c);
  }
  return Status::error("unknown kernel");
}

} // namespace m3idx::kernels
