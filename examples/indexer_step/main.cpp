// One decode step through m3idx::Indexer, built against an installed m3idx with find_package:
// 4 query rows over a 3-block request, keys from a fixed pattern; prints the rows' top-k block ids.
// `indexer_step cuda` runs it on the GPU (buffers from the CUDA runtime), else on the host JIT.
#include <cstdio>
#include <cstring>
#include <vector>
#include <m3idx/Indexer.h>
#ifdef M3IDX_EXAMPLE_CUDA
#include <cuda_runtime.h>
#endif

int main(int argc, char **argv) {
  const bool cuda = argc > 1 && std::strcmp(argv[1], "cuda") == 0;
  const m3idx::Device device{cuda ? m3idx::DeviceKind::Cuda : m3idx::DeviceKind::Host, 0};
  std::vector<uint8_t> q(4 * 128, 0x38), kv(3 * 9216);           // q: e4m3 1.0 everywhere
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = (i % 9216) < 8192 ? uint8_t(i * 7 % 251) : 0x38;
  std::vector<int32_t> table = {2, 0, 1}, seqLens = {300}, topk(4 * 16);
  void *dq = q.data(), *dkv = kv.data(), *dtopk = topk.data();
#ifdef M3IDX_EXAMPLE_CUDA
  if (cuda) {
    cudaMalloc(&dq, q.size()); cudaMalloc(&dkv, kv.size()); cudaMalloc(&dtopk, topk.size() * 4);
    cudaMemcpy(dq, q.data(), q.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dkv, kv.data(), kv.size(), cudaMemcpyHostToDevice);
  }
#endif
  auto indexer = m3idx::Indexer::create(m3idx::IndexerConfig{}, device);
  if (!indexer.ok()) return std::fprintf(stderr, "%s\n", indexer.status().message().c_str()), 1;
  m3idx::DecodeMetadata decode{m3idx::TensorView::contiguous(table.data(), m3idx::DType::I32, {1, 3}),
                               m3idx::TensorView::contiguous(seqLens.data(), m3idx::DType::I32, {1}), 4, 300};
  m3idx::TensorView out = m3idx::TensorView::contiguous(dtopk, m3idx::DType::I32, {1, 4, 16}, device);
  auto r = (*indexer)->forward(m3idx::TensorView::contiguous(dq, m3idx::DType::U8, {4, 1, 128}, device),
                               m3idx::TensorView::contiguous(dkv, m3idx::DType::U8, {3, 9216}, device),
                               m3idx::IndexerMetadata{&decode, nullptr}, nullptr, &out);
  if (!r.ok()) return std::fprintf(stderr, "%s\n", r.status().message().c_str()), 1;
#ifdef M3IDX_EXAMPLE_CUDA
  if (cuda) cudaMemcpy(topk.data(), dtopk, topk.size() * 4, cudaMemcpyDeviceToHost);
#endif
  for (int row = 0; row < 4; ++row)
    std::printf("row %d: blocks %d %d %d\n", row, topk[row * 16], topk[row * 16 + 1], topk[row * 16 + 2]);
}
