// The library's own host time of one Indexer::decode() (checks, the cached launch plan, argument
// binding), with a stand-in CUDA driver whose launches do nothing: what a decode step costs the
// host besides the driver's cuLaunchKernel calls and a caller's binding (Python's ctypes).
// Usage: m3idx-decode-host-time STAND_IN_DRIVER.so [REQUESTS HEADS ROWS]...  (defaults: the
// shapes of bench/graph_decode.py). The stand-in is the tests' libfake_cuda.so: with a real
// driver the host pointers given here would reach kernels, so another library is refused.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <m3idx/Indexer.h>

namespace {

int timeShape(int D, int H, int Q) {
  const m3idx::Device device{m3idx::DeviceKind::Cuda, 0};
  m3idx::IndexerConfig config;
  config.numIndexHeads = H;
  config.maxDecodeQueryLen = 8;
  config.decodeQueryLens = {Q};
  auto indexer = m3idx::Indexer::create(config, device);
  if (!indexer.ok())
    return std::fprintf(stderr, "%s\n", indexer.status().message().c_str()), 1;
  if (m3idx::Status s = (*indexer)->warmup(); !s.ok())
    return std::fprintf(stderr, "%s\n", s.message().c_str()), 1;
  constexpr int64_t kPages = 64, kColumns = 8192; // the block table of max_model_len 1M
  std::vector<uint8_t> q(size_t(D) * Q * H * 128), kv(kPages * 9216);
  std::vector<int32_t> table(size_t(D) * kColumns), seqLens(D, 131072), topk(size_t(H) * D * Q * 16);
  using m3idx::DType;
  using m3idx::TensorView;
  const TensorView qv = TensorView::contiguous(q.data(), DType::U8, {D * Q, H, 128}, device),
                   kvv = TensorView::contiguous(kv.data(), DType::U8, {kPages, 9216}, device),
                   tv = TensorView::contiguous(table.data(), DType::I32, {D, kColumns}, device),
                   sv = TensorView::contiguous(seqLens.data(), DType::I32, {D}, device),
                   ov = TensorView::contiguous(topk.data(), DType::I32, {H, D * Q, 16}, device);
  std::vector<double> us;
  for (int i = 0; i < 20000; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = (*indexer)->decode(qv, kvv, tv, sv, nullptr, &ov);
    const auto t1 = std::chrono::steady_clock::now();
    if (!r.ok())
      return std::fprintf(stderr, "%s\n", r.status().message().c_str()), 1;
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  std::printf("%4d requests x %d rows, H=%d: Indexer::decode() host time median %.2f us (p10 %.2f, p90 %.2f; "
              "20000 calls, launches that do nothing)\n",
              D, Q, H, us[us.size() / 2], us[us.size() / 10], us[us.size() * 9 / 10]);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || std::strstr(argv[1], "fake_cuda") == nullptr || (argc - 2) % 3 != 0) {
    std::fprintf(stderr, "usage: %s PATH/libfake_cuda.so [REQUESTS HEADS ROWS]...\n", argv[0]);
    return 2;
  }
  setenv("M3IDX_CUDA_LIBRARY", argv[1], 1);
  std::vector<int> shapes = {256, 1, 4, 64, 4, 4, 8, 1, 4, 64, 1, 8, 64, 4, 8};
  if (argc > 2) {
    shapes.clear();
    for (int i = 2; i < argc; ++i)
      shapes.push_back(std::atoi(argv[i]));
  }
  for (size_t i = 0; i < shapes.size(); i += 3)
    if (int rc = timeShape(shapes[i], shapes[i + 1], shapes[i + 2]))
      return rc;
  return 0;
}
