#include "runtime/api/InProcessCp.h"

#include <cstring>
#include <thread>

#include "core/DecodeCpPolicy.h"
#include "core/Spec.h"
#include "m3idx/Indexer.h"
#include "runtime/api/BatchMetadata.h"

namespace m3idx::runtime {

StatusOr<IndexerOutput> runHostDecodeCp(const BatchView &b, int world, std::string *fallback) {
  M3IDX_RETURN_IF_ERROR(validateBatch(b));
  if (b.params.numHeads != world)
    return invalidArgument("num_index_heads", fmt::format("{} (one head per rank)", world),
                           b.params.numHeads);
  CpDecision gate = decideDecodeCp(b.params, world, false);
  if (!gate.useCp && fallback)
    *fallback = gate.fallbackReason;
  const int64_t T = b.numRows;
  BatchMetadata split;
  splitBatch(b, split);

  IndexerOutput out;
  out.numHeads = world;
  out.numRows = T;
  out.scoreWidth = spec::scoreWidth(planRows(b).maxNblk);
  out.topk.assign(static_cast<size_t>(world) * T * spec::kTopkBlocks, -1);
  auto group = makeInProcessGroup(world);
  std::vector<Status> status(world);
  std::vector<std::thread> ranks;
  for (int h = 0; h < world; ++h)
    ranks.emplace_back([&, h] {
      IndexerConfig config;
      config.numIndexHeads = 1;
      config.initBlocks = b.params.initBlocks;
      config.localBlocks = b.params.localBlocks;
      config.decodeQueryLens = {b.params.decodeQueryLen};
      StatusOr<std::unique_ptr<Indexer>> indexer = Indexer::create(config, Device{});
      if (!indexer.ok()) {
        status[h] = indexer.status();
        return; // a rank that leaves the collective would hang the others: create cannot fail
      }         // here for a validated case, since the config comes from it
      std::vector<uint8_t> q(static_cast<size_t>(T) * spec::kIndexHeadDim); // this rank's head
      for (int64_t r = 0; r < T; ++r)
        std::memcpy(&q[r * spec::kIndexHeadDim], b.q + (r * world + h) * spec::kIndexHeadDim,
                    spec::kIndexHeadDim);
      Status s = (*indexer)->initDecodeCp(group[h]);
      if (s.ok())
        s = (*indexer)->warmup();
      if (!s.ok()) {
        status[h] = s;
        return;
      }
      StatusOr<ForwardResult> r = (*indexer)->forward(
          TensorView::contiguous(q.data(), DType::U8, {T, 1, spec::kIndexHeadDim}),
          TensorView::contiguous(const_cast<uint8_t *>(b.kv), DType::U8,
                                 {b.numPages, spec::kPageBytes}),
          split.metadata());
      if (!r.ok()) {
        status[h] = r.status();
        return;
      }
      std::memcpy(&out.topk[h * T * spec::kTopkBlocks], r->topk.data,
                  T * spec::kTopkBlocks * sizeof(int32_t));
    });
  for (std::thread &t : ranks)
    t.join();
  for (const Status &s : status)
    M3IDX_RETURN_IF_ERROR(s);
  return out;
}

} // namespace m3idx::runtime
