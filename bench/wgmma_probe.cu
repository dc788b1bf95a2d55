// Would Hopper's native fp8 wgmma make the decode score faster, and is it exact enough? score_decode's
// loop is bound by its ALU pipe, and 32 of its ALU instructions per 16-token tile are F2FP
// widenings of the keys for the f16 mma.sync that ptxas's e4m3 mma.sync emulation (and our
// lowering) runs on sm_90. This probe runs the same loop on REQUESTS x TOKENS tokens of SPEC §3
// pages in a shuffled page order (runs of BLOCKS pages per program, 16-token tiles loaded a tile
// ahead, the NVFP4 decode by a per-scale key table and prmt, a running max per block and column):
//   mma         -- one warp per program, keys widened to f16 pairs, 8 mma.sync m16n8k16 per tile (ours);
//   wgmma       -- one warpgroup per program, each warp a quarter of a block's tiles, the e4m3 keys
//                  straight from registers into wgmma.mma_async m64n8k32 (4 per 64 tokens), the
//                  queries (8 columns, K-major, no swizzle) in shared memory;
//   wgmma split -- the same with each k32 step in its own accumulator, the four added in f32.
// Each path's maxima on request 0's first 256 blocks are compared with exact (double) ones as a
// multiple of the fp32 bound the product's checker allows; then each is timed after an L2 flush
// (CUDA events, median of 20) next to a device copy of as many bytes. Not the product's kernel:
// masks, heads and the top-k are left out; it measures the loop. Built with nvcc for sm_90a by
// `bash bench/gpu.sh wgmma`. Usage: wgmma_probe REQUESTS TOKENS [BLOCKS]
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "CudaBench.cuh"
#include "Nvfp4Probe.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

namespace {

using namespace probe;

constexpr int kTokens = 128, kTiles = 8, kCols = 8, kRows = 4;

// Row g (or g + 8) of a tile as 8 key words: elements 4w .. 4w + 3 of the thread's 32.
__device__ __forceinline__ void decodeRow(uint4 d, uint32_t s0, uint32_t s1, const uint2 *table, uint32_t *out) {
  const uint2 t0 = table[s0], t1 = table[s1];
  decodeWord(d.x, t0, out[0], out[1]);
  decodeWord(d.y, t0, out[2], out[3]);
  decodeWord(d.z, t1, out[4], out[5]);
  decodeWord(d.w, t1, out[6], out[7]);
}

struct Tile {
  uint4 a, b;            // rows g, g + 8: 16 bytes of packed codes each
  uint32_t s0, s1, s2, s3; // their scale bytes (groups 2t, 2t + 1)
};

__device__ __forceinline__ Tile loadTile(const uint8_t *page, int tile, int lane) {
  Tile t;
  const uint8_t *d = page + tile * 1024 + lane * 16, *s = page + kDataBytes + tile * 128 + lane * 2;
  t.a = *reinterpret_cast<const uint4 *>(d);
  t.b = *reinterpret_cast<const uint4 *>(d + 512);
  t.s0 = s[0], t.s1 = s[1], t.s2 = s[64], t.s3 = s[65];
  return t;
}

// The K position of wgmma step s, index k (0..31) and of mma.sync step s: dim 32t + 8s + [0, 8)
// of the thread's slice, so both paths read the keys as loaded (the B side mirrors it).
__device__ __host__ inline int dimOf(int s, int k) { return 32 * ((k % 16) / 4) + 8 * s + (k / 16) * 4 + k % 4; }

__device__ __forceinline__ float colMax(float v) {
  for (int x = 4; x < 32; x *= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, x));
  return v;
}

// One warp per program: BLOCKS blocks of one request, 8 tiles each.
__global__ void __launch_bounds__(32) scoreMma(const uint8_t *kv, const int *pageTable, const uint8_t *q,
                                               const uint8_t *tableG, int blocksPerReq, int bpp, float *out) {
  __shared__ uint2 table[256];
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  for (int i = lane; i < 256; i += 32)
    table[i] = reinterpret_cast<const uint2 *>(tableG)[i];
  const int chunks = (blocksPerReq + bpp - 1) / bpp, req = blockIdx.x / chunks;
  const int first = (blockIdx.x % chunks) * bpp, last = min(first + bpp, blocksPerReq);
  // B fragments, f16: step s, half h, b0/b1 = column g, dims of K 2t, 2t + 1 / 2t + 8, 2t + 9.
  uint32_t bf[16];
  for (int s = 0; s < 4; ++s)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 2; ++i) {
        uint32_t w = 0;
        if (g < kRows)
          for (int j = 0; j < 2; ++j)
            w |= uint32_t(q[(req * kRows + g) * 128 + 32 * t + 8 * s + 4 * h + 2 * i + j]) << (8 * j);
        bf[(s * 2 + h) * 2 + i] = f16Pair(w, 0);
      }
  __syncwarp();
  const uint8_t *page = kv + size_t(pageTable[req * blocksPerReq + first]) * kPageBytes;
  Tile cur = loadTile(page, 0, lane);
  for (int blk = first; blk < last; ++blk) {
    const uint8_t *next = kv + size_t(pageTable[req * blocksPerReq + min(blk + 1, last - 1)]) * kPageBytes;
    float m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    for (int tile = 0; tile < kTiles; ++tile) {
      Tile nt = tile == kTiles - 1 ? loadTile(next, 0, lane) : loadTile(page, tile + 1, lane);
      uint32_t ka[8], kb[8];
      decodeRow(cur.a, cur.s0, cur.s1, table, ka);
      decodeRow(cur.b, cur.s2, cur.s3, table, kb);
      float c[4] = {0, 0, 0, 0};
#pragma unroll
      for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int w = 2 * s + h;
          asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
              "{%0,%1,%2,%3};"
              : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
              : "r"(f16Pair(ka[w], 0)), "r"(f16Pair(kb[w], 0)), "r"(f16Pair(ka[w], 1)), "r"(f16Pair(kb[w], 1)),
                "r"(bf[w * 2]), "r"(bf[w * 2 + 1]));
        }
      for (int i = 0; i < 4; ++i)
        m[i] = fmaxf(m[i], c[i]);
      cur = nt;
    }
    page = next;
    const float c0 = colMax(fmaxf(m[0], m[2])), c1 = colMax(fmaxf(m[1], m[3]));
    if (g == 0) {
      out[(size_t(req) * blocksPerReq + blk) * kCols + 2 * t] = c0;
      out[(size_t(req) * blocksPerReq + blk) * kCols + 2 * t + 1] = c1;
    }
  }
}

// One warpgroup per program: warp w scores tiles w and w + 4 of each block; 64 tokens per wgmma.
// Split: each k32 step into its own accumulator, the 4 summed in fp32 on the FMA pipe (as DeepGEMM
// promotes fp8 wgmma partial sums), in case the tensor core's fp8 accumulation is not fp32.
template <bool Split>
__global__ void __launch_bounds__(128) scoreWgmma(const uint8_t *kv, const int *pageTable, const uint8_t *q,
                                                  const uint8_t *tableG, int blocksPerReq, int bpp, float *out) {
  __shared__ uint2 table[256];
  __shared__ alignas(128) uint8_t bsm[4 * 256]; // step s: 2 core matrices (K 0-15, 16-31) of 8 x 16 bytes
  __shared__ float red[4][kCols];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  for (int i = tid; i < 256; i += 128)
    table[i] = reinterpret_cast<const uint2 *>(tableG)[i];
  const int chunks = (blocksPerReq + bpp - 1) / bpp, req = blockIdx.x / chunks;
  const int first = (blockIdx.x % chunks) * bpp, last = min(first + bpp, blocksPerReq);
  for (int i = tid; i < 4 * 256; i += 128) {
    const int s = i / 256, core = (i % 256) / 128, n = (i % 128) / 16, k = core * 16 + i % 16;
    bsm[i] = n < kRows ? q[(req * kRows + n) * 128 + dimOf(s, k)] : 0;
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(bsm));
  const uint64_t desc = uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(128 >> 4) << 16) | (uint64_t(128 >> 4) << 32);
  const uint8_t *page = kv + size_t(pageTable[req * blocksPerReq + first]) * kPageBytes;
  Tile cur = loadTile(page, warp, lane);
  for (int blk = first; blk < last; ++blk) {
    const uint8_t *next = kv + size_t(pageTable[req * blocksPerReq + min(blk + 1, last - 1)]) * kPageBytes;
    float m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    for (int half = 0; half < 2; ++half) {
      Tile nt = half ? loadTile(next, warp, lane) : loadTile(page, warp + 4, lane);
      uint32_t ka[8], kb[8];
      decodeRow(cur.a, cur.s0, cur.s1, table, ka);
      decodeRow(cur.b, cur.s2, cur.s3, table, kb);
      float d0, d1, d2, d3;
      if constexpr (Split) {
        float e[16];
        asm volatile(
            "{\n.reg .b64 d1, d2, d3;\n.reg .pred zero;\n"
            "setp.ne.b32 zero, 0, 0;\n"
            "add.s64 d1, %32, 16;\nadd.s64 d2, %32, 32;\nadd.s64 d3, %32, 48;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%16,%17,%18,%19}, %32, zero, 1, 1;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%4,%5,%6,%7}, {%20,%21,%22,%23}, d1, zero, 1, 1;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%8,%9,%10,%11}, {%24,%25,%26,%27}, d2, zero, 1, 1;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%12,%13,%14,%15}, {%28,%29,%30,%31}, d3, zero, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n}"
            : "=f"(e[0]), "=f"(e[1]), "=f"(e[2]), "=f"(e[3]), "=f"(e[4]), "=f"(e[5]), "=f"(e[6]), "=f"(e[7]),
              "=f"(e[8]), "=f"(e[9]), "=f"(e[10]), "=f"(e[11]), "=f"(e[12]), "=f"(e[13]), "=f"(e[14]), "=f"(e[15])
            : "r"(ka[0]), "r"(kb[0]), "r"(ka[1]), "r"(kb[1]), "r"(ka[2]), "r"(kb[2]), "r"(ka[3]), "r"(kb[3]),
              "r"(ka[4]), "r"(kb[4]), "r"(ka[5]), "r"(kb[5]), "r"(ka[6]), "r"(kb[6]), "r"(ka[7]), "r"(kb[7]),
              "l"(desc)
            : "memory");
        d0 = (e[0] + e[4]) + (e[8] + e[12]), d1 = (e[1] + e[5]) + (e[9] + e[13]);
        d2 = (e[2] + e[6]) + (e[10] + e[14]), d3 = (e[3] + e[7]) + (e[11] + e[15]);
      } else {
        asm volatile(
            "{\n.reg .b64 d1, d2, d3;\n.reg .pred zero, add;\n"
            "setp.ne.b32 zero, 0, 0;\nsetp.eq.b32 add, 0, 0;\n"
            "add.s64 d1, %20, 16;\nadd.s64 d2, %20, 32;\nadd.s64 d3, %20, 48;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %20, zero, 1, 1;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%8,%9,%10,%11}, d1, add, 1, 1;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%12,%13,%14,%15}, d2, add, 1, 1;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%16,%17,%18,%19}, d3, add, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n}"
            : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
            : "r"(ka[0]), "r"(kb[0]), "r"(ka[1]), "r"(kb[1]), "r"(ka[2]), "r"(kb[2]), "r"(ka[3]), "r"(kb[3]),
              "r"(ka[4]), "r"(kb[4]), "r"(ka[5]), "r"(kb[5]), "r"(ka[6]), "r"(kb[6]), "r"(ka[7]), "r"(kb[7]),
              "l"(desc)
            : "memory");
      }
      m[0] = fmaxf(m[0], d0), m[1] = fmaxf(m[1], d1), m[2] = fmaxf(m[2], d2), m[3] = fmaxf(m[3], d3);
      cur = nt;
    }
    page = next;
    const float c0 = colMax(fmaxf(m[0], m[2])), c1 = colMax(fmaxf(m[1], m[3]));
    if (g == 0)
      red[warp][2 * t] = c0, red[warp][2 * t + 1] = c1;
    __syncthreads();
    if (tid < kCols)
      out[(size_t(req) * blocksPerReq + blk) * kCols + tid] =
          fmaxf(fmaxf(red[0][tid], red[1][tid]), fmaxf(red[2][tid], red[3][tid]));
    __syncthreads();
  }
}


} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: wgmma_probe REQUESTS TOKENS [BLOCKS]\n");
    return 2;
  }
  const int reqs = std::atoi(argv[1]), blocksPerReq = std::atoi(argv[2]) / kTokens;
  const int bpp = argc > 3 ? std::atoi(argv[3]) : 8;
  const size_t pages = size_t(reqs) * blocksPerReq, kvBytes = pages * kPageBytes;
  std::vector<int> order(pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  std::vector<uint8_t> qh(size_t(reqs) * kRows * 128);
  for (size_t i = 0; i < qh.size(); ++i) {
    uint8_t b = uint8_t(mix(i + 77));
    qh[i] = (b & 0x7F) == 0x7F ? b ^ 1 : b; // no NaN queries
  }
  uint8_t *kv, *q, *table, *flush;
  int *pt;
  float *outA, *outB, *outC;
  const size_t outN = pages * kCols, flushBytes = size_t(512) << 20;
  CHECK(cudaMalloc(&kv, kvBytes));
  CHECK(cudaMalloc(&q, qh.size()));
  CHECK(cudaMalloc(&table, 256 * 8));
  CHECK(cudaMalloc(&flush, flushBytes));
  CHECK(cudaMalloc(&pt, pages * sizeof(int)));
  CHECK(cudaMalloc(&outA, outN * sizeof(float)));
  CHECK(cudaMalloc(&outB, outN * sizeof(float)));
  CHECK(cudaMalloc(&outC, outN * sizeof(float)));
  CHECK(cudaMemcpy(q, qh.data(), qh.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(pt, order.data(), pages * sizeof(int), cudaMemcpyHostToDevice));
  fillPages<<<4096, 256>>>(kv, kvBytes);
  fillTable<<<256, 8>>>(table);
  CHECK(cudaDeviceSynchronize());

  const int chunks = (blocksPerReq + bpp - 1) / bpp, programs = reqs * chunks;
  auto mma = [&] { scoreMma<<<programs, 32>>>(kv, pt, q, table, blocksPerReq, bpp, outA); };
  auto wg = [&] { scoreWgmma<false><<<programs, 128>>>(kv, pt, q, table, blocksPerReq, bpp, outB); };
  auto wgSplit = [&] { scoreWgmma<true><<<programs, 128>>>(kv, pt, q, table, blocksPerReq, bpp, outC); };
  mma();
  wg();
  wgSplit();
  CHECK(cudaDeviceSynchronize());
  std::vector<float> a(outN), b(outN), c(outN);
  CHECK(cudaMemcpy(a.data(), outA, outN * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(b.data(), outB, outN * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(c.data(), outC, outN * sizeof(float), cudaMemcpyDeviceToHost));
  // Each path against the exact (double) maxima on request 0's first blocks, as a multiple of
  // the fp32 bound the product's checker allows (reference/TopkCheck.cpp: the largest |product| sum
  // of the block's tokens times 128 * 2^-24, plus half an ulp of the result).
  std::vector<uint8_t> th(256 * 8), pageBytes(kPageBytes);
  CHECK(cudaMemcpy(th.data(), table, th.size(), cudaMemcpyDeviceToHost));
  const int checked = std::min(256, blocksPerReq);
  double worst[3] = {0, 0, 0};
  size_t over[3] = {0, 0, 0}, differ = 0;
  for (size_t i = 0; i < outN; ++i)
    differ += a[i] != b[i];
  for (int blk = 0; blk < checked; ++blk) {
    CHECK(cudaMemcpy(pageBytes.data(), kv + size_t(order[blk]) * kPageBytes, kPageBytes, cudaMemcpyDeviceToHost));
    for (int col = 0; col < kRows; ++col) {
      double best = -INFINITY, bound = 0;
      for (int tok = 0; tok < kTokens; ++tok) {
        double dot = 0, abs = 0;
        for (int d = 0; d < 128; ++d) {
          const uint8_t nib = (pageBytes[tok * 64 + d / 2] >> (4 * (d % 2))) & 15;
          const uint8_t key = th[pageBytes[kDataBytes + tok * 8 + d / 16] * 8 + (nib & 7)] ^ ((nib & 8) ? 0x80 : 0);
          const double p = double(e4m3(key)) * e4m3(qh[col * 128 + d]);
          dot += p, abs += std::fabs(p);
        }
        best = std::max(best, dot), bound = std::max(bound, abs * 128 * 0x1p-24);
      }
      bound += std::fabs(best) * 0x1p-24;
      const float *paths[3] = {a.data(), b.data(), c.data()};
      for (int p = 0; p < 3; ++p) {
        const double r = std::fabs(paths[p][size_t(blk) * kCols + col] - best) / bound;
        worst[p] = std::max(worst[p], r);
        over[p] += r > 1;
      }
    }
  }
  std::printf("%d x %d tokens, %d blocks per program: mma and wgmma differ in %zu of %zu maxima; error / fp32 "
              "bound on %d blocks x %d columns (worst, count over 1): mma %.3f %zu, wgmma %.3f %zu, wgmma split "
              "%.3f %zu\n",
              reqs, blocksPerReq * kTokens, bpp, differ, outN, checked, kRows, worst[0], over[0], worst[1], over[1],
              worst[2], over[2]);

  EventTimer timer;
  timer.flush = flush, timer.flushBytes = flushBytes;
  const double tm = timer.medianMs(mma, 2), tw = timer.medianMs(wg, 2), ts = timer.medianMs(wgSplit, 2);
  CHECK(cudaGetLastError());
  uint8_t *dst;
  CHECK(cudaMalloc(&dst, kvBytes));
  const double tc = timer.medianMs([&] { CHECK(cudaMemcpyAsync(dst, kv, kvBytes, cudaMemcpyDeviceToDevice)); }, 2);
  const double copyGBs = 2.0 * kvBytes / (tc * 1e6);
  for (auto [name, ms] : {std::pair<const char *, double>{"mma.sync f16 (ours)", tm}, {"wgmma e4m3", tw}, {"wgmma e4m3 split", ts}})
    std::printf("  %-20s %.3f ms, %.0f GB/s of index-K, %.1f%% of copy (%.0f GB/s)\n", name, ms,
                kvBytes / (ms * 1e6), 100.0 * kvBytes / (ms * 1e6) / copyGBs, copyGBs);
  return 0;
}
