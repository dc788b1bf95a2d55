#include "bench/support/DeviceCase.h"

#include "core/Spec.h"

namespace m3idx::bench {

namespace {

void *address(uint64_t p) { return reinterpret_cast<void *>(static_cast<uintptr_t>(p)); }

// Output poison (0x7B7B7B7B is no block id): entries a step fails to write cannot pass (METHOD.md).
constexpr uint8_t kPoison = 0x7B;

} // namespace

StatusOr<std::unique_ptr<DeviceCase>> DeviceCase::upload(const DeviceApi &api, Device device,
                                                         const BatchView &b, bool deviceTables) {
  std::unique_ptr<DeviceCase> c(new DeviceCase(api, device, b));
  const int64_t qBytes = b.numRows * b.params.numHeads * spec::kIndexHeadDim;
  const int64_t kvBytes = b.numPages * spec::kPageBytes;
  const int64_t topkBytes = b.params.numHeads * b.numRows * spec::kTopkBlocks * 4;
  StatusOr<uint64_t> q = c->q_.ensure(qBytes), kv = c->kv_.ensure(kvBytes), topk = c->topk_.ensure(topkBytes);
  for (const StatusOr<uint64_t> *p : {&q, &kv, &topk})
    if (!p->ok())
      return p->status();
  if (qBytes)
    M3IDX_RETURN_IF_ERROR(api.check(api.upload(*q, b.q, qBytes), "host-to-device copy"));
  if (kvBytes)
    M3IDX_RETURN_IF_ERROR(api.check(api.upload(*kv, b.kv, kvBytes), "host-to-device copy"));
  runtime::splitBatch(b, c->split_);
  if (deviceTables) {
    const int64_t D = b.params.numDecodes, R = b.numRequests, M = b.maxBlocks;
    StatusOr<uint64_t> table = c->table_.ensure(R * M * 4);
    if (!table.ok())
      return table.status();
    if (R * M != 0)
      M3IDX_RETURN_IF_ERROR(api.check(api.upload(*table, b.blockTable, R * M * 4), "host-to-device copy"));
    c->split_.decode.deviceBlockTable =
        TensorView::contiguous(address(*table), DType::I32, {D, M}, device);
    c->split_.prefill.deviceBlockTable =
        TensorView::contiguous(address(*table + 4 * D * M), DType::I32, {R - D, M}, device);
  }
  return c;
}

StatusOr<ForwardResult> DeviceCase::forward(Indexer &indexer, Stream stream, bool callerTopk) {
  const BatchView &b = batch_;
  const int64_t H = b.params.numHeads, T = b.numRows;
  TensorView q = TensorView::contiguous(address(q_.ptr()), DType::U8, {T, H, spec::kIndexHeadDim}, device_);
  TensorView kv = TensorView::contiguous(address(kv_.ptr()), DType::U8, {b.numPages, spec::kPageBytes}, device_);
  TensorView out = TensorView::contiguous(address(topk_.ptr()), DType::I32, {H, T, spec::kTopkBlocks}, device_);
  if (callerTopk && out.numel())
    M3IDX_RETURN_IF_ERROR(api_.check(api_.memsetAsync(topk_.ptr(), kPoison, out.numel() * 4, stream),
                                     "memset (poison)"));
  StatusOr<ForwardResult> r = indexer.forward(q, kv, split_.metadata(), stream, callerTopk ? &out : nullptr);
  if (r.ok() && callerTopk && r->topk.data != out.data)
    return Status::error("forward(): the result does not name the caller's top-k buffer");
  return r;
}

StatusOr<std::vector<int32_t>> DeviceCase::download(const ForwardResult &r) const {
  M3IDX_RETURN_IF_ERROR(api_.check(api_.synchronize(), "synchronize"));
  std::vector<int32_t> topk(r.topk.numel());
  if (topk.empty())
    return topk;
  const uint64_t at = reinterpret_cast<uintptr_t>(r.topk.data);
  M3IDX_RETURN_IF_ERROR(api_.check(api_.download(topk.data(), at, topk.size() * 4), "device-to-host copy"));
  // Whichever buffer this was, a later step into it must write every entry again to pass.
  M3IDX_RETURN_IF_ERROR(api_.check(api_.memsetAsync(at, kPoison, topk.size() * 4, nullptr), "memset (poison)"));
  return topk;
}

} // namespace m3idx::bench
