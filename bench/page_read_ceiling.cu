// The read ceiling of the decode score's access pattern on this GPU, next to the copy rate: how
// fast can any kernel read REQUESTS x TOKENS tokens of index-K laid out as SPEC §3 pages (9216
// bytes) in a shuffled page order, as score_decode does (runs of 8 pages per warp, 16-token tiles,
// two 16-byte data loads and two 2-byte scale loads per thread and tile)? Only loads and an XOR
// to keep them alive: no decode, no math. Built and run on the GPU machine by
// `bash bench/gpu.sh ceiling` (nvcc); medians of 20 timed runs after a warm-up, CUDA events.
// Usage: page_read_ceiling REQUESTS TOKENS
#include "CudaBench.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

namespace {

constexpr int kPageBytes = 9216, kDataBytes = 8192, kTilesPerPage = 8, kPagesPerRun = 8;

// One warp reads one run of up to 8 pages tile by tile, the lanes' addresses as score_decode's
// (thread g*4+t: 16 bytes of tokens g and g + 8, 2 scale bytes of each). AHEAD tiles' loads are
// issued before the oldest is consumed (1: as score_decode's loop-carried prefetch).
template <int AHEAD>
__global__ void readRuns(const uint8_t *kv, const int *table, int pagesPerReq, int runsPerReq,
                         int runs, unsigned *sink) {
  const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
  if (warp >= runs)
    return;
  const int req = warp / runsPerReq, first = (warp % runsPerReq) * kPagesPerRun;
  const int last = min(first + kPagesPerRun, pagesPerReq), tiles = (last - first) * kTilesPerPage;
  auto pageOf = [&](int i) {
    return kv + size_t(table[req * pagesPerReq + first + i / kTilesPerPage]) * kPageBytes;
  };
  uint4 d0[AHEAD], d1[AHEAD];
  unsigned short s0[AHEAD], s1[AHEAD];
  auto load = [&](int slot, int i) {
    i = min(i, tiles - 1); // past the run: the last tile again (cached)
    const uint8_t *page = pageOf(i);
    const int t = i % kTilesPerPage;
    d0[slot] = *reinterpret_cast<const uint4 *>(page + t * 1024 + lane * 16);
    d1[slot] = *reinterpret_cast<const uint4 *>(page + t * 1024 + 512 + lane * 16);
    s0[slot] = *reinterpret_cast<const unsigned short *>(page + kDataBytes + t * 128 + lane * 2);
    s1[slot] = *reinterpret_cast<const unsigned short *>(page + kDataBytes + t * 128 + 64 + lane * 2);
  };
#pragma unroll
  for (int a = 0; a < AHEAD; ++a)
    load(a, a);
  unsigned acc = 0;
  for (int i = 0; i < tiles; i += AHEAD) {
#pragma unroll
    for (int a = 0; a < AHEAD; ++a) {
      acc ^= d0[a].x ^ d0[a].y ^ d0[a].z ^ d0[a].w ^ d1[a].x ^ d1[a].y ^ d1[a].z ^ d1[a].w ^ s0[a] ^ s1[a];
      load(a, i + AHEAD + a);
    }
  }
  if (acc == 0x9E3779B9u) // never in practice; keeps the loads
    sink[warp * 32 + lane] = acc;
}


} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s REQUESTS TOKENS\n", argv[0]);
    return 2;
  }
  const int requests = std::atoi(argv[1]), pagesPerReq = (std::atoi(argv[2]) + 127) / 128;
  const size_t pages = size_t(requests) * pagesPerReq, bytes = pages * kPageBytes;
  uint8_t *kv, *copyDst;
  int *table;
  unsigned *sink;
  CHECK(cudaMalloc(&kv, bytes));
  CHECK(cudaMalloc(&copyDst, bytes));
  CHECK(cudaMemset(kv, 0x5A, bytes));
  CHECK(cudaMalloc(&table, pages * sizeof(int)));
  std::vector<int> order(pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  CHECK(cudaMemcpy(table, order.data(), pages * sizeof(int), cudaMemcpyHostToDevice));
  const int runsPerReq = (pagesPerReq + kPagesPerRun - 1) / kPagesPerRun, runs = requests * runsPerReq;
  CHECK(cudaMalloc(&sink, size_t(runs) * 32 * sizeof(unsigned)));
  EventTimer timer;
  auto report = [&](const char *what, double ms, double moved) {
    std::printf("  %-44s %8.3f ms  %7.1f GB/s\n", what, ms, moved / (ms * 1e6));
  };
  std::printf("%d requests x %d pages: %.2f GB of index-K in shuffled pages\n", requests, pagesPerReq,
              bytes / 1e9);
  report("copy (read + write)", timer.medianMs([&] {
           CHECK(cudaMemcpyAsync(copyDst, kv, bytes, cudaMemcpyDeviceToDevice));
         }), 2.0 * bytes);
  auto reads = [&](const char *what, auto kernel, int warpsPerCta) {
    const int ctas = (runs + warpsPerCta - 1) / warpsPerCta;
    report(what, timer.medianMs([&] {
             kernel<<<ctas, 32 * warpsPerCta>>>(kv, table, pagesPerReq, runsPerReq, runs, sink);
             CHECK(cudaGetLastError());
           }), double(bytes));
  };
  reads("read, 1 warp/CTA, 1 tile ahead (as ours)", readRuns<1>, 1);
  reads("read, 1 warp/CTA, 2 tiles ahead", readRuns<2>, 1);
  reads("read, 1 warp/CTA, 4 tiles ahead", readRuns<4>, 1);
  reads("read, 4 warps/CTA, 1 tile ahead", readRuns<1>, 4);
  reads("read, 4 warps/CTA, 2 tiles ahead", readRuns<2>, 4);
  reads("read, 4 warps/CTA, 4 tiles ahead", readRuns<4>, 4);
  return 0;
}
