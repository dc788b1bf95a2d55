// The C ABI over the C++ API. Every entry point catches everything: no exception crosses it.
#include "m3idx/m3idx.h"

#include <cstring>
#include <new>
#include <string>

#include "m3idx/Indexer.h"

struct m3idx_error {
  std::string message;
};

struct m3idx_indexer {
  std::unique_ptr<m3idx::Indexer> impl;
};

struct m3idx_plan {
  std::shared_ptr<const m3idx::IndexerPlan> impl;
};

struct m3idx_decode_cp {
  std::shared_ptr<m3idx::DecodeCp> impl; // the indexers that joined it share it
};

namespace {

using namespace m3idx;

m3idx_error *makeError(std::string message) {
  return new (std::nothrow) m3idx_error{std::move(message)};
}

m3idx_error *fromStatus(const Status &s) { return s.ok() ? nullptr : makeError(s.message()); }

IndexerConfig toConfig(const m3idx_config &c) {
  IndexerConfig config;
  config.numIndexHeads = c.num_index_heads;
  config.indexHeadDim = c.index_head_dim;
  config.sparseBlockSize = c.sparse_block_size;
  config.topkBlocks = c.topk_blocks;
  config.scoreType = c.score_type ? c.score_type : "";
  config.kvDtype = c.kv_dtype ? c.kv_dtype : "";
  config.initBlocks = c.init_blocks;
  config.localBlocks = c.local_blocks;
  config.maxModelLen = c.max_model_len;
  config.decodeQueryLens = {c.decode_query_len};
  config.maxNumDecodes = c.max_num_decodes;
  config.maxDecodeQueryLen = c.max_decode_query_len;
  config.checkDecodeSync = c.check_decode_sync != 0;
  config.reserveDecodeWorkspace = c.reserve_decode_workspace != 0;
  return config;
}

bool toTensor(const m3idx_tensor *t, const char *name, TensorView &out, std::string &error) {
  if (!t) {
    error = std::string(name) + ": expected a tensor, got NULL";
    return false;
  }
  if (t->ndim < 0 || t->ndim > kMaxDims || t->dtype < 0 || t->dtype > 2 || t->device_kind < 0 ||
      t->device_kind > 2) {
    error = std::string(name) + ": expected ndim <= 4 and a known dtype and device, got ndim " +
            std::to_string(t->ndim) + ", dtype " + std::to_string(t->dtype) + ", device " +
            std::to_string(t->device_kind);
    return false;
  }
  out.data = t->data;
  out.dtype = static_cast<DType>(t->dtype);
  out.ndim = t->ndim;
  for (int d = 0; d < kMaxDims; ++d) {
    out.shape[d] = t->shape[d];
    out.strides[d] = t->strides[d];
  }
  out.device = Device{static_cast<DeviceKind>(t->device_kind), t->device_index};
  return true;
}

void fromTensor(const TensorView &v, m3idx_tensor *t) {
  if (!t)
    return;
  std::memset(t, 0, sizeof(*t));
  t->data = v.data;
  t->dtype = static_cast<int32_t>(v.dtype);
  t->ndim = v.ndim;
  for (int d = 0; d < kMaxDims; ++d) {
    t->shape[d] = v.shape[d];
    t->strides[d] = v.strides[d];
  }
  t->device_kind = static_cast<int32_t>(v.device.kind);
  t->device_index = v.device.index;
}

// The metadata structs as the C++ API's (views of the same arrays); false with `error` set.
bool toMetadata(const m3idx_decode_metadata *decode, const m3idx_prefill_metadata *prefill, DecodeMetadata &d,
                PrefillMetadata &p, IndexerMetadata &md, std::string &error) {
  if (decode) {
    if (!toTensor(&decode->block_table, "decode.block_table", d.blockTable, error) ||
        !toTensor(&decode->seq_lens, "decode.seq_lens", d.seqLens, error))
      return false;
    if (decode->device_block_table.data &&
        !toTensor(&decode->device_block_table, "decode.device_block_table", d.deviceBlockTable, error))
      return false;
    d.decodeQueryLen = decode->decode_query_len;
    d.maxSeqLen = decode->max_seq_len;
    md.decode = &d;
  }
  if (prefill) {
    if (!toTensor(&prefill->block_table, "prefill.block_table", p.blockTable, error) ||
        !toTensor(&prefill->query_start_loc, "prefill.query_start_loc", p.queryStartLoc, error) ||
        !toTensor(&prefill->seq_lens, "prefill.seq_lens", p.seqLens, error))
      return false;
    if (prefill->device_block_table.data &&
        !toTensor(&prefill->device_block_table, "prefill.device_block_table", p.deviceBlockTable, error))
      return false;
    p.maxQueryLen = prefill->max_query_len;
    p.maxSeqLen = prefill->max_seq_len;
    md.prefill = &p;
  }
  return true;
}

void fromResult(const ForwardResult &r, m3idx_tensor *topk, m3idx_tensor *decodeTopk, m3idx_tensor *prefillTopk) {
  fromTensor(r.topk, topk);
  fromTensor(r.decodeTopk, decodeTopk);
  fromTensor(r.prefillTopk, prefillTopk);
}

template <typename Fn> m3idx_error *guarded(Fn fn) {
  try {
    return fn();
  } catch (const std::exception &e) {
    return makeError(std::string("internal error: ") + e.what());
  } catch (...) {
    return makeError("internal error");
  }
}

} // namespace

extern "C" {

int32_t m3idx_api_version(void) { return M3IDX_API_VERSION; }

void m3idx_config_init(m3idx_config *c) {
  if (!c)
    return;
  c->num_index_heads = 1;
  c->index_head_dim = 128;
  c->sparse_block_size = 128;
  c->topk_blocks = 16;
  c->score_type = "max";
  c->kv_dtype = "nvfp4";
  c->init_blocks = 0;
  c->local_blocks = 1;
  c->max_model_len = 1 << 20;
  c->decode_query_len = 4;
  c->max_num_decodes = 256;
  c->max_decode_query_len = 4;
  c->check_decode_sync = 0;
  c->reserve_decode_workspace = 1;
}

size_t m3idx_unsupported_reason(const m3idx_config *config, int32_t device_kind, char *buf,
                                size_t buf_len) {
  try {
    std::string reason = !config ? "config: expected a config, got NULL"
                         : device_kind < 0 || device_kind > 2
                             ? "device_kind: expected 0 (host), 1 (cuda) or 2 (hip), got " +
                                   std::to_string(device_kind)
                             : unsupportedReason(toConfig(*config),
                                                 static_cast<DeviceKind>(device_kind));
    if (buf && buf_len) {
      size_t n = std::min(reason.size(), buf_len - 1);
      std::memcpy(buf, reason.data(), n);
      buf[n] = '\0';
    }
    return reason.size();
  } catch (...) {
    return 0;
  }
}

m3idx_error *m3idx_indexer_create(const m3idx_config *config, int32_t device_kind,
                                  int32_t device_index, m3idx_indexer **out) {
  return guarded([&]() -> m3idx_error * {
    if (!config || !out)
      return makeError("m3idx_indexer_create: expected config and out, got NULL");
    *out = nullptr;
    if (device_kind < 0 || device_kind > 2)
      return makeError("device_kind: expected 0 (host), 1 (cuda) or 2 (hip), got " +
                       std::to_string(device_kind));
    auto indexer = Indexer::create(toConfig(*config),
                                   Device{static_cast<DeviceKind>(device_kind), device_index});
    if (!indexer.ok())
      return fromStatus(indexer.status());
    *out = new m3idx_indexer{std::move(indexer).value()};
    return nullptr;
  });
}

void m3idx_indexer_destroy(m3idx_indexer *indexer) { delete indexer; }

m3idx_error *m3idx_indexer_warmup(m3idx_indexer *indexer) {
  return guarded([&]() -> m3idx_error * {
    if (!indexer)
      return makeError("m3idx_indexer_warmup: expected an indexer, got NULL");
    return fromStatus(indexer->impl->warmup());
  });
}

m3idx_error *m3idx_indexer_forward(m3idx_indexer *indexer, const m3idx_tensor *index_query,
                                   const m3idx_tensor *kv_cache,
                                   const m3idx_decode_metadata *decode,
                                   const m3idx_prefill_metadata *prefill, void *stream,
                                   const m3idx_tensor *topk_out, m3idx_tensor *topk,
                                   m3idx_tensor *decode_topk, m3idx_tensor *prefill_topk) {
  return guarded([&]() -> m3idx_error * {
    if (!indexer)
      return makeError("m3idx_indexer_forward: expected an indexer, got NULL");
    std::string error;
    TensorView q, kv, out;
    if (!toTensor(index_query, "index_query", q, error) ||
        !toTensor(kv_cache, "kv_cache", kv, error) ||
        (topk_out && !toTensor(topk_out, "topk_out", out, error)))
      return makeError(error);
    DecodeMetadata d;
    PrefillMetadata p;
    IndexerMetadata md;
    if (!toMetadata(decode, prefill, d, p, md, error))
      return makeError(error);
    auto r = indexer->impl->forward(q, kv, md, stream, topk_out ? &out : nullptr);
    if (!r.ok())
      return fromStatus(r.status());
    fromResult(*r, topk, decode_topk, prefill_topk);
    return nullptr;
  });
}

m3idx_error *m3idx_indexer_plan(m3idx_indexer *indexer, const m3idx_decode_metadata *decode,
                                const m3idx_prefill_metadata *prefill, void *stream, m3idx_plan **out) {
  return guarded([&]() -> m3idx_error * {
    if (!indexer)
      return makeError("m3idx_indexer_plan: expected an indexer, got NULL");
    if (!out)
      return makeError("m3idx_indexer_plan: expected somewhere to put the plan, got NULL");
    *out = nullptr;
    std::string error;
    DecodeMetadata d;
    PrefillMetadata p;
    IndexerMetadata md;
    if (!toMetadata(decode, prefill, d, p, md, error))
      return makeError(error);
    auto plan = indexer->impl->plan(md, stream);
    if (!plan.ok())
      return fromStatus(plan.status());
    *out = new m3idx_plan{std::move(plan).value()};
    return nullptr;
  });
}

m3idx_error *m3idx_indexer_run(m3idx_indexer *indexer, const m3idx_plan *plan, const m3idx_tensor *index_query,
                               const m3idx_tensor *kv_cache, void *stream, const m3idx_tensor *topk_out,
                               m3idx_tensor *topk, m3idx_tensor *decode_topk, m3idx_tensor *prefill_topk) {
  return guarded([&]() -> m3idx_error * {
    if (!indexer)
      return makeError("m3idx_indexer_run: expected an indexer, got NULL");
    if (!plan)
      return makeError("plan: expected a plan (m3idx_indexer_plan), got NULL");
    std::string error;
    TensorView q, kv, out;
    if (!toTensor(index_query, "index_query", q, error) || !toTensor(kv_cache, "kv_cache", kv, error) ||
        (topk_out && !toTensor(topk_out, "topk_out", out, error)))
      return makeError(error);
    auto r = indexer->impl->run(*plan->impl, q, kv, stream, topk_out ? &out : nullptr);
    if (!r.ok())
      return fromStatus(r.status());
    fromResult(*r, topk, decode_topk, prefill_topk);
    return nullptr;
  });
}

void m3idx_plan_destroy(m3idx_plan *plan) { delete plan; }

int64_t m3idx_plan_rows(const m3idx_plan *plan) { return plan ? plan->impl->rows() : -1; }

m3idx_error *m3idx_indexer_decode(m3idx_indexer *indexer, const m3idx_tensor *index_query,
                                  const m3idx_tensor *kv_cache, const m3idx_tensor *block_table,
                                  const m3idx_tensor *seq_lens, void *stream,
                                  const m3idx_tensor *topk_out, m3idx_tensor *topk,
                                  const m3idx_tensor *workspace) {
  return guarded([&]() -> m3idx_error * {
    if (!indexer)
      return makeError("m3idx_indexer_decode: expected an indexer, got NULL");
    std::string error;
    TensorView q, kv, table, lens, out, ws;
    if (!toTensor(index_query, "index_query", q, error) || !toTensor(kv_cache, "kv_cache", kv, error) ||
        !toTensor(block_table, "block_table", table, error) || !toTensor(seq_lens, "seq_lens", lens, error) ||
        (topk_out && !toTensor(topk_out, "topk_out", out, error)) ||
        (workspace && !toTensor(workspace, "workspace", ws, error)))
      return makeError(error);
    auto r = indexer->impl->decode(q, kv, table, lens, stream, topk_out ? &out : nullptr,
                                   workspace ? &ws : nullptr);
    if (!r.ok())
      return fromStatus(r.status());
    fromTensor(*r, topk);
    return nullptr;
  });
}

m3idx_error *m3idx_indexer_read_status(m3idx_indexer *indexer, void *stream, int32_t clear,
                                       int64_t *seq_lens_word, int64_t *block_table_word) {
  return guarded([&]() -> m3idx_error * {
    if (!indexer)
      return makeError("m3idx_indexer_read_status: expected an indexer, got NULL");
    auto s = indexer->impl->readDeviceStatus(stream, clear != 0);
    if (!s.ok())
      return fromStatus(s.status());
    if (seq_lens_word)
      *seq_lens_word = s->seqLens;
    if (block_table_word)
      *block_table_word = s->blockTable;
    return nullptr;
  });
}

m3idx_error *m3idx_indexer_check_status(m3idx_indexer *indexer, void *stream) {
  return guarded([&]() -> m3idx_error * {
    if (!indexer)
      return makeError("m3idx_indexer_check_status: expected an indexer, got NULL");
    auto s = indexer->impl->readDeviceStatus(stream, true);
    if (!s.ok())
      return fromStatus(s.status());
    return s->ok() ? nullptr : makeError(s->message());
  });
}

int64_t m3idx_indexer_decode_workspace_bytes(const m3idx_indexer *indexer) {
  try {
    return indexer ? indexer->impl->decodeWorkspaceBytes() : -1;
  } catch (...) {
    return -1;
  }
}

int64_t m3idx_indexer_compiles_after_warmup(const m3idx_indexer *indexer) {
  return indexer ? indexer->impl->compilesAfterWarmup() : -1;
}

m3idx_error *m3idx_decode_cp_create(const char *group_name, int32_t rank, int32_t world, int64_t max_model_len,
                                    int32_t device_kind, int32_t device_index, int32_t timeout_ms,
                                    m3idx_decode_cp **out) {
  return guarded([&]() -> m3idx_error * {
    if (!group_name || !out)
      return makeError("m3idx_decode_cp_create: expected a group name and out, got NULL");
    *out = nullptr;
    if (device_kind < 0 || device_kind > 2)
      return makeError("device_kind: expected 0 (host), 1 (cuda) or 2 (hip), got " + std::to_string(device_kind));
    auto cp = DecodeCp::create({group_name, rank, world, timeout_ms, max_model_len},
                               Device{static_cast<DeviceKind>(device_kind), device_index});
    if (!cp.ok())
      return fromStatus(cp.status());
    *out = new m3idx_decode_cp{std::move(cp).value()};
    return nullptr;
  });
}

void m3idx_decode_cp_destroy(m3idx_decode_cp *cp) { delete cp; }

int32_t m3idx_decode_cp_departed_rank(const m3idx_decode_cp *cp) { return cp ? cp->impl->departedRank() : -2; }

m3idx_error *m3idx_indexer_join_decode_cp(m3idx_indexer *indexer, m3idx_decode_cp *cp) {
  return guarded([&]() -> m3idx_error * {
    if (!indexer || !cp)
      return makeError("m3idx_indexer_join_decode_cp: expected an indexer and a decode CP group, got NULL");
    return fromStatus(indexer->impl->joinDecodeCp(cp->impl));
  });
}

int32_t m3idx_indexer_decode_cp_active(const m3idx_indexer *indexer) {
  return indexer ? (indexer->impl->decodeCpActive() ? 1 : 0) : -1;
}

const char *m3idx_error_message(const m3idx_error *error) {
  return error ? error->message.c_str() : "";
}

void m3idx_error_free(m3idx_error *error) { delete error; }

} // extern "C"
