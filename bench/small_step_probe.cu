// The floor of the smallest decode step (issue 40's 1 x 4K target): what a step of one request of
// TOKENS tokens, 4 rows, 1 head costs graph-replayed with L2 flushed when its work is reduced to
// the dependent chain every exact step has -- seq_len, then the block table, then the pages (all
// 8 tiles' loads in flight at once), a score per row and block, then the row's top 16 of those
// scores -- and almost nothing else: the "score" is an XOR of the page's bytes (no NVFP4 decode,
// no mma), the top-k one warp's bitonic sort of at most 32 keys. Forms, each a CUDA graph:
//   empty1 / empty2      one / two kernels that do nothing: the replay floor
//   fused                one launch: a program a block, the last to arrive (atomic count) sorts
//   two                  score then top-k launches (m3idx's structure)
//   two+pdl              the same with programmatic dependent launch: top-k launched early and
//                        waiting on griddepcontrol.wait
//   pdl-cap              two+pdl on the grids m3idx launches at capacity 1M (4096 warpgroup score
//                        programs resident 5 a SM, 4 x 256 top-k segments), most leaving at once
//   guess                two+pdl with each block's table entry loaded beside seq_len (m3idx's order)
//   cluster              one launch: a cluster of 8 programs (4 warps, a block a warp) gathering the
//                        scores in one program's shared memory, whose warps then sort a row each
// Each form's ids are checked against the host's sort of the scores it wrote. Built and run on the
// GPU machine by `bash bench/gpu.sh small-step` (nvcc). Usage: small_step_probe [TOKENS]
#include "CudaBench.cuh"

#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace {

namespace cg = cooperative_groups;

constexpr int kPageBytes = 9216, kRows = 4, kTopk = 16, kMaxBlocks = 32;

struct Step {
  const int *seqLens, *table;
  const uint8_t *kv;
  float *scores; // [kRows, kMaxBlocks]
  int *count;    // arrivals, 0 between steps
  int *ids;      // [kRows, kTopk]
};

// Lane's share of block blk's page (8 tiles: 2 data and 2 scale loads each, as score_decode's
// lanes), all issued before any is used; per row, the warp's max of an XOR of the bytes.
__device__ void scoreBlock(const Step &s, int blk, int lane, int pageId, float *rowMax = nullptr) {
  const uint8_t *page = s.kv + size_t(pageId) * kPageBytes;
  uint4 d[16];
  unsigned short sc[16];
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    d[2 * t] = *reinterpret_cast<const uint4 *>(page + t * 1024 + lane * 16);
    d[2 * t + 1] = *reinterpret_cast<const uint4 *>(page + t * 1024 + 512 + lane * 16);
    sc[2 * t] = *reinterpret_cast<const unsigned short *>(page + 8192 + t * 128 + lane * 2);
    sc[2 * t + 1] = *reinterpret_cast<const unsigned short *>(page + 8192 + t * 128 + 64 + lane * 2);
  }
  unsigned acc = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i)
    acc ^= d[i].x ^ d[i].y ^ d[i].z ^ d[i].w ^ sc[i];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float v = float((acc * (2654435761u + 2 * r)) >> 12);
    for (int o = 16; o; o /= 2)
      v = fmaxf(v, __shfl_xor_sync(~0u, v, o));
    if (lane == 0)
      s.scores[r * kMaxBlocks + blk] = v;
    if (rowMax && lane == 0)
      rowMax[r * kMaxBlocks + blk] = v;
  }
}

// Row r's top 16 of its nblk (<= 32) scores (global memory, or `from` where given): one key a
// lane, a descending bitonic sort.
__device__ void topkRow(const Step &s, int r, int nblk, int lane, const float *from = nullptr) {
  unsigned long long key = 0;
  if (lane < nblk) {
    unsigned u = __float_as_uint(from ? from[r * kMaxBlocks + lane] : __ldcg(&s.scores[r * kMaxBlocks + lane]));
    unsigned ord = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    key = (static_cast<unsigned long long>(ord) << 32) | unsigned(lane);
  }
  for (int k = 2; k <= 32; k *= 2)
    for (int j = k / 2; j; j /= 2) {
      unsigned long long other = __shfl_xor_sync(~0u, key, j);
      bool lower = (lane & j) == 0, descending = (lane & k) == 0 || k == 32;
      bool takeMax = lower == descending;
      key = takeMax ? max(key, other) : min(key, other);
    }
  if (lane < kTopk)
    s.ids[r * kTopk + lane] = key ? int(key & 0xFFFFFFFFu) : -1;
}

__device__ int blocksOf(const Step &s) { return min((__ldcg(s.seqLens) + 127) / 128, kMaxBlocks); }

__global__ void emptyKernel(int *sink) {
  if (threadIdx.x == 1000)
    *sink = 0;
}

__global__ void fusedStep(Step s) {
  const int lane = threadIdx.x, nblk = blocksOf(s);
  if (int(blockIdx.x) >= nblk)
    return;
  scoreBlock(s, blockIdx.x, lane, s.table[blockIdx.x]);
  int last = 0;
  if (lane == 0) {
    __threadfence();
    last = atomicAdd(s.count, 1) == nblk - 1;
  }
  if (!__shfl_sync(~0u, last, 0))
    return;
  __threadfence();
  for (int r = 0; r < kRows; ++r)
    topkRow(s, r, nblk, lane);
  if (lane == 0)
    *s.count = 0;
}

template <bool PDL> __global__ void scoreStep(Step s) {
  if (PDL)
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int nblk = blocksOf(s);
  if (int(blockIdx.x) < nblk)
    scoreBlock(s, blockIdx.x, threadIdx.x, s.table[blockIdx.x]);
}

// m3idx's order: the block's table entry loaded beside seq_len, not after it.
__global__ void scoreStepGuess(Step s) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int pageId = __ldcg(&s.table[blockIdx.x]), nblk = blocksOf(s);
  if (int(blockIdx.x) < nblk)
    scoreBlock(s, blockIdx.x, threadIdx.x, pageId);
}

// One launch without a grid-wide arrival: a cluster of 8 programs of 4 warps, a block a warp, each
// writing its rows' scores into the first program's shared memory (distributed shared memory);
// after the cluster's barrier that program's first 4 warps sort a row each.
constexpr int kClusterPrograms = 8;

__global__ void __cluster_dims__(kClusterPrograms, 1, 1) clusterStep(Step s) {
  __shared__ float rowScores[kRows * kMaxBlocks];
  cg::cluster_group cluster = cg::this_cluster();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, blk = blockIdx.x * 4 + warp;
  const int pageId = __ldcg(&s.table[blk]), nblk = blocksOf(s);
  if (blk < nblk)
    scoreBlock(s, blk, lane, pageId, cluster.map_shared_rank(rowScores, 0));
  cluster.sync();
  if (cluster.block_rank() == 0)
    topkRow(s, warp, nblk, lane, rowScores);
}

template <bool PDL> __global__ void topkStep(Step s) {
  if (PDL)
    asm volatile("griddepcontrol.wait;" ::: "memory");
  topkRow(s, blockIdx.x, blocksOf(s), threadIdx.x);
}

// The grids m3idx launches at capacity 1M (score_decode: 4096 warpgroup programs; topk_decode: a
// row's 8192 blocks in 256 segments of 32): programs past the step's blocks or a row's first
// segment leave at once (the top-k's before its wait), as m3idx's do.
template <bool PDL> __global__ void scoreStepWide(Step s) {
  if (PDL)
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int nblk = blocksOf(s);
  if (threadIdx.x < 32 && int(blockIdx.x) < nblk)
    scoreBlock(s, blockIdx.x, threadIdx.x, s.table[blockIdx.x]);
}

constexpr int kWideSegments = 256, kWideSmem = 44 * 1024;

template <bool PDL> __global__ void topkStepWide(Step s) {
  const int nblk = blocksOf(s), segment = blockIdx.x % kWideSegments;
  if (segment * 32 >= nblk)
    return;
  if (PDL)
    asm volatile("griddepcontrol.wait;" ::: "memory");
  topkRow(s, blockIdx.x / kWideSegments, nblk, threadIdx.x);
}

template <typename K>
void launch(cudaStream_t st, K kernel, int grid, const Step &s, bool pdl, int threads = 32, int smem = 0) {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(grid);
  c.blockDim = dim3(threads);
  c.dynamicSmemBytes = smem;
  c.stream = st;
  cudaLaunchAttribute a[1];
  a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = a;
  c.numAttrs = pdl ? 1 : 0;
  CHECK(cudaLaunchKernelEx(&c, kernel, s));
}

template <typename F> cudaGraphExec_t capture(cudaStream_t st, F &&body) {
  cudaGraph_t g;
  cudaGraphExec_t e;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  body();
  CHECK(cudaStreamEndCapture(st, &g));
  CHECK(cudaGraphInstantiate(&e, g, 0));
  return e;
}

} // namespace

int main(int argc, char **argv) {
  const int tokens = argc > 1 ? std::atoi(argv[1]) : 4096;
  const int nblk = (tokens + 127) / 128;
  if (tokens < 1 || nblk > kMaxBlocks) {
    std::fprintf(stderr, "TOKENS in [1, %d]\n", kMaxBlocks * 128);
    return 2;
  }
  const int pages = 4096; // blocks land on random pages of a 37 MB cache
  std::mt19937 rng(1);
  std::vector<uint8_t> kv(size_t(pages) * kPageBytes);
  for (auto &b : kv)
    b = uint8_t(rng());
  std::vector<int> table(kMaxBlocks);
  for (auto &p : table)
    p = int(rng() % pages);
  Step s;
  uint8_t *kvDev;
  int *intDev;
  float *scores;
  CHECK(cudaMalloc(&kvDev, kv.size()));
  CHECK(cudaMemcpy(kvDev, kv.data(), kv.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&intDev, sizeof(int) * (2 + kMaxBlocks + kRows * kTopk)));
  CHECK(cudaMalloc(&scores, sizeof(float) * kRows * kMaxBlocks));
  CHECK(cudaMemset(intDev, 0, sizeof(int) * (2 + kMaxBlocks + kRows * kTopk)));
  CHECK(cudaMemcpy(intDev, &tokens, sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(intDev + 2, table.data(), sizeof(int) * kMaxBlocks, cudaMemcpyHostToDevice));
  s = {intDev, intDev + 2, kvDev, scores, intDev + 1, intDev + 2 + kMaxBlocks};

  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  struct Form {
    const char *name;
    cudaGraphExec_t exec;
    bool checked;
  };
  std::vector<Form> forms = {
      {"empty1", capture(st, [&] { emptyKernel<<<1, 32, 0, st>>>(intDev); }), false},
      {"empty2", capture(st, [&] { emptyKernel<<<1, 32, 0, st>>>(intDev); emptyKernel<<<1, 32, 0, st>>>(intDev); }), false},
      {"fused", capture(st, [&] { launch(st, fusedStep, kMaxBlocks, s, false); }), true},
      {"two", capture(st, [&] { launch(st, scoreStep<false>, kMaxBlocks, s, false); launch(st, topkStep<false>, kRows, s, false); }), true},
      {"two+pdl", capture(st, [&] { launch(st, scoreStep<true>, kMaxBlocks, s, false); launch(st, topkStep<true>, kRows, s, true); }), true},
      {"guess", capture(st, [&] { launch(st, scoreStepGuess, kMaxBlocks, s, false); launch(st, topkStep<true>, kRows, s, true); }), true},
      {"cluster", capture(st, [&] { launch(st, clusterStep, kClusterPrograms, s, false, 128); }), true},
      // m3idx's grids at capacity 1M: score programs 5 a SM (its 96 registers x 128 threads; here
      // 44 KiB of shared memory each)
      {"pdl-cap", capture(st, [&] { launch(st, scoreStepWide<true>, 4096, s, false, 128, kWideSmem); launch(st, topkStepWide<true>, kRows * kWideSegments, s, true); }), true},
  };
  EventTimer timer;
  timer.flushBytes = size_t(256) << 20;
  CHECK(cudaMalloc(&timer.flush, timer.flushBytes));
  std::printf("small step: 1 request x %d tokens (%d blocks), %d rows, 1 head; graph replay, us, median of 200\n",
              tokens, nblk, kRows);
  for (const Form &f : forms) {
    CHECK(cudaMemset(intDev + 2 + kMaxBlocks, 0xFF, sizeof(int) * kRows * kTopk));
    uint8_t *flush = timer.flush;
    const double flushed = timer.medianMs([&] { CHECK(cudaGraphLaunch(f.exec, 0)); }, 5, 200);
    timer.flush = nullptr;
    const double warm = timer.medianMs([&] { CHECK(cudaGraphLaunch(f.exec, 0)); }, 5, 200);
    timer.flush = flush;
    CHECK(cudaDeviceSynchronize());
    const char *verdict = "-";
    if (f.checked) {
      std::vector<float> sc(kRows * kMaxBlocks);
      std::vector<int> ids(kRows * kTopk), count(1);
      CHECK(cudaMemcpy(sc.data(), scores, sizeof(float) * sc.size(), cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(ids.data(), s.ids, sizeof(int) * ids.size(), cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(count.data(), s.count, sizeof(int), cudaMemcpyDeviceToHost));
      bool ok = count[0] == 0;
      for (int r = 0; r < kRows; ++r) {
        std::vector<int> order(nblk);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int a, int b) {
          float x = sc[r * kMaxBlocks + a], y = sc[r * kMaxBlocks + b];
          return x != y ? x > y : a > b;
        });
        for (int i = 0; i < kTopk; ++i)
          ok = ok && ids[r * kTopk + i] == (i < nblk ? order[i] : -1);
      }
      verdict = ok ? "ids ok" : "IDS WRONG";
    }
    std::printf("  %-8s L2 flushed %6.2f us   L2 warm %6.2f us   %s\n", f.name, flushed * 1e3, warm * 1e3, verdict);
  }
  return 0;
}
