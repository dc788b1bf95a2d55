#include "core/DecodeCpPolicy.h"

#include <fmt/format.h>

#include "core/Spec.h"

namespace m3idx {

CpDecision decideDecodeCp(const IndexerParams &p, int worldSize, bool dualBatchOverlap) {
  auto no = [](std::string why) { return CpDecision{false, std::move(why)}; };
  if (worldSize != spec::kCpWorld)
    return no(fmt::format("decode CP needs TP == WORLD == {}, got {}", spec::kCpWorld, worldSize));
  if (p.numHeads != worldSize)
    return no(fmt::format("decode CP needs num_index_heads == 1 per rank, got {} heads over {} "
                          "ranks",
                          p.numHeads, worldSize));
  if (p.numDecodes > 0 && p.decodeQueryLen != spec::kCpQueryLen)
    return no(fmt::format("decode CP needs decode_query_len == {}, got {}", spec::kCpQueryLen,
                          p.decodeQueryLen));
  if (p.numDecodes > spec::kCpMaxRequests)
    return no(fmt::format("decode CP serves at most {} decode requests, got {}",
                          spec::kCpMaxRequests, p.numDecodes));
  if (dualBatchOverlap)
    return no("decode CP is off under dual-batch overlap");
  return CpDecision{true, ""};
}

} // namespace m3idx
