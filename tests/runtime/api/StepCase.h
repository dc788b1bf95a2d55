// A case as the Indexer API takes it, for the API's tests: the vLLM-style metadata split of its
// step and views of its q and kv_cache on the host.
#pragma once

#include <memory>

#include "casefile/CaseFile.h"
#include "m3idx/Indexer.h"
#include "runtime/api/BatchMetadata.h"

namespace m3idx::testing {

struct StepCase {
  Case c;
  runtime::BatchMetadata split;
  TensorView q, kv;
  IndexerMetadata md() const { return split.metadata(); }
};

inline std::unique_ptr<StepCase> stepCaseOf(Case c) {
  auto s = std::make_unique<StepCase>();
  s->c = std::move(c);
  const BatchView v = s->c.view();
  runtime::splitBatch(v, s->split);
  s->q = TensorView::contiguous(s->c.q.bytes.data(), DType::U8, {v.numRows, v.params.numHeads, 128});
  s->kv = TensorView::contiguous(s->c.kv.bytes.data(), DType::U8, {v.numPages, 9216});
  return s;
}

// The config a case's step is served with: its heads, init and local blocks, and its
// decode_query_len warmed up.
inline IndexerConfig indexerConfigOf(const Case &c) {
  IndexerConfig config;
  config.numIndexHeads = c.params.numHeads;
  config.initBlocks = c.params.initBlocks;
  config.localBlocks = c.params.localBlocks;
  config.decodeQueryLens = {c.params.decodeQueryLen};
  return config;
}

} // namespace m3idx::testing
