// The exact NVFP4 decode score, hand-written, in score_decode's page pattern: how fast can the
// decode step's score kernel be on this GPU, and what bounds it? Issue 40's bandwidth targets ask
// for 90% of copy on 256 x 32K, 256 x 128K and 8 x 1M (H=1, 4 rows) and 80% on 64 x 128K H=4.
//
// The kernel is score_decode's loop written in CUDA with inline PTX (SPEC §2-§4; the sequence is
// lowering/nvvm/Sm90Emitter.cpp's): a per-scale key table (2 KB of shared memory, the 8 rounded
// products e4m3_rn_satfinite(m * scale) of all 256 scales, built by cvt.rn.satfinite.e4m3x2.f16x2),
// one prmt looking up 4 nibbles, the signs spread by a prmt in sign-replicate mode and merged by a
// lop3, cvt.rn.f16x2.e4m3x2 widening, mma.sync m16n8k16 f16 -> f32 over 16-token tiles (thread
// g*4+t holds 16 bytes of tokens g and g+8), a running fmaxf per token slot, a block's max reduced
// by shuffles and stored. Every block is whole and fully visible (no causal mask: the last block
// of a decode row is the only masked one). What the variants change:
//   - schedule: `grid` (one program per run of RUN blocks, as score_decode) or `persistent` (as many
//     one-warp programs as fit, each taking runs from an atomic counter: the table is built once
//     per program, not once per run, and no wave has a tail);
//   - AHEAD key tiles in flight;
//   - the decode: `exact` (the above) or, for timing only (wrong values, not checked), `nosign`
//     (the sign prmts and merges left out) and `nodecode` (the packed bytes fed to the mma as they
//     are: what loads + mma + max alone cost, the bound for any decode).
// Exact variants are checked against a host reference (core/Nvfp4's key bytes; dots in double, each
// score within 1e-5 of the sum of |q k| — the kernel's fp32 sum order is its own).
// Built and run on the GPU machine by `bash bench/gpu.sh probe` (nvcc); CUDA events, L2 flushed by
// a 256 MB memset before each run, medians of 30 after 3 warm-ups.
// Usage: nvfp4_decode_probe REQUESTS TOKENS HEADS
#include "CudaBench.cuh"
#include "core/Nvfp4.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace {

constexpr int kPageBytes = 9216, kDataBytes = 8192, kTilesPerBlock = 8, kRows = 4;

enum Decode { kExact, kNoSign, kNoDecode };

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}
__device__ __forceinline__ uint32_t lop3SignMerge(uint32_t mag, uint32_t sign) {
  uint32_t d; // mag ^ (sign & 0x80808080), immLut 0x78 = a ^ (b & c): the table carries the scale's sign
  asm("lop3.b32 %0, %1, %2, %3, 0x78;" : "=r"(d) : "r"(mag), "r"(sign), "r"(0x80808080u));
  return d;
}
__device__ __forceinline__ uint32_t e4m3x2ToF16x2(uint32_t two) {
  uint32_t d;
  asm("{.reg .b16 t; cvt.u16.u32 t, %1; cvt.rn.f16x2.e4m3x2 %0, t;}" : "=r"(d) : "r"(two));
  return d;
}
__device__ __forceinline__ uint32_t f16x2ToE4m3x2(uint32_t h2) {
  uint16_t d;
  asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(d) : "r"(h2));
  return d;
}
__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Key bytes of the 8 positive E2M1 magnitudes times scale s: {0, .5, 1, 1.5} in .x, {2, 3, 4, 6}
// in .y (byte j = code j), products exact in f16, cvt's satfinite rounding the only one (SPEC §2).
__device__ uint2 keyWordsOf(uint32_t s) {
  const uint32_t sc = e4m3x2ToF16x2(s | (s << 8));
  const uint32_t mags[4] = {0x38000000u, 0x3E003C00u, 0x42004000u, 0x46004400u}; // f16 pairs
  uint32_t p[4];
  for (int i = 0; i < 4; ++i)
    p[i] = f16x2ToE4m3x2(hmul2(mags[i], sc));
  return make_uint2(p[0] | (p[1] << 16), p[2] | (p[3] << 16));
}

// One packed word (8 elements of one scale group) into 4 f16x2 registers, elements (0,1), (2,3),
// (4,5), (6,7).
template <Decode D> __device__ __forceinline__ void decodeWord(uint32_t x, uint2 tab, uint32_t *out) {
  if (D == kNoDecode) {
    out[0] = x;
    out[1] = x ^ 0x01010101u;
    out[2] = x >> 1;
    out[3] = x ^ 0x10101010u;
    return;
  }
  const uint32_t codes = x & 0x77777777u;
  uint32_t w0 = prmt(tab.x, tab.y, codes), w1 = prmt(tab.x, tab.y, codes >> 16);
  if (D == kExact) {
    const uint32_t e = x << 4;
    w0 = lop3SignMerge(w0, prmt(e, x, 0xD9C8));
    w1 = lop3SignMerge(w1, prmt(e, x, 0xFBEA));
  }
  out[0] = e4m3x2ToF16x2(w0);
  out[1] = e4m3x2ToF16x2(w0 >> 16);
  out[2] = e4m3x2ToF16x2(w1);
  out[3] = e4m3x2ToF16x2(w1 >> 16);
}

struct Args {
  const uint8_t *kv;
  const int *table;      // [R, blocksPerReq]
  const uint8_t *q;      // [R * 4 rows, H, 128]
  float *score;          // [H, R * 4, blocksPerReq]
  int requests, blocksPerReq, heads, run, runsPerReq;
  unsigned *ticket;      // persistent: the next run
};

// One warp. CT column tiles of 8 (columns = rows x heads, row-major: column c = row c / H, head c % H).
template <int CT, int AHEAD, Decode D, bool PERSISTENT> __global__ void __launch_bounds__(32) scoreRuns(Args a) {
  __shared__ uint2 keyWords[256];
  const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  for (int s = lane; s < 256; s += 32)
    keyWords[s] = keyWordsOf(s);
  __syncwarp();
  const int columns = kRows * a.heads;
  // One ticket a warp: lane 0 takes it, the others read it.
  auto nextRun = [&] { return __shfl_sync(0xFFFFFFFFu, lane == 0 ? int(atomicAdd(a.ticket, 1u)) : 0, 0); };
  int work = PERSISTENT ? nextRun() : int(blockIdx.x);
  const int totalRuns = a.requests * a.runsPerReq;
  int loadedReq = -1;
  uint32_t bq[CT][8][2];
  while (work < totalRuns) {
    const int req = work / a.runsPerReq, first = (work % a.runsPerReq) * a.run;
    const int blocks = min(a.run, a.blocksPerReq - first);
    if (req != loadedReq) { // B fragments: column ct*8+g, K elements 32t + 4s + {0,1} and {2,3}
      loadedReq = req;
      for (int ct = 0; ct < CT; ++ct) {
        const int c = ct * 8 + g;
        uint4 v0 = make_uint4(0, 0, 0, 0), v1 = v0;
        if (c < columns) {
          const uint8_t *row = a.q + (size_t(req * kRows + c / a.heads) * a.heads + c % a.heads) * 128 + 32 * t;
          v0 = *reinterpret_cast<const uint4 *>(row);
          v1 = *reinterpret_cast<const uint4 *>(row + 16);
        }
        const uint32_t w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        for (int s = 0; s < 8; ++s) {
          bq[ct][s][0] = e4m3x2ToF16x2(w[s]);
          bq[ct][s][1] = e4m3x2ToF16x2(w[s] >> 16);
        }
      }
    }
    const int *tableRow = a.table + size_t(req) * a.blocksPerReq + first;
    // Tiles at constant offsets: a block's 8 tiles unrolled, AHEAD tiles in flight, the next
    // block's page (its table entry read a block early) for the loads past the block's end.
    uint4 d[AHEAD][2];
    uint32_t sc[AHEAD][2];
    auto load = [&](int slot, const uint8_t *page, int tile) {
      d[slot][0] = *reinterpret_cast<const uint4 *>(page + tile * 1024 + g * 64 + t * 16);
      d[slot][1] = *reinterpret_cast<const uint4 *>(page + tile * 1024 + (g + 8) * 64 + t * 16);
      sc[slot][0] = *reinterpret_cast<const uint16_t *>(page + kDataBytes + (tile * 16 + g) * 8 + 2 * t);
      sc[slot][1] = *reinterpret_cast<const uint16_t *>(page + kDataBytes + (tile * 16 + g + 8) * 8 + 2 * t);
    };
    const uint8_t *page = a.kv + size_t(tableRow[0]) * kPageBytes;
#pragma unroll
    for (int s = 0; s < AHEAD; ++s)
      load(s, page, s);
    for (int blk = 0; blk < blocks; ++blk) {
      const uint8_t *next = a.kv + size_t(tableRow[min(blk + 1, blocks - 1)]) * kPageBytes;
      float mx[CT][4];
#pragma unroll
      for (int ct = 0; ct < CT; ++ct)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          mx[ct][j] = -INFINITY;
#pragma unroll
      for (int tile = 0; tile < kTilesPerBlock; ++tile) {
        const int s = tile % AHEAD;
        uint32_t k[2][16]; // token g, g+8: 16 f16x2 each, elements 32t + 2r, 2r+1
#pragma unroll
        for (int tok = 0; tok < 2; ++tok) {
          const uint2 t0 = keyWords[sc[s][tok] & 0xFF], t1 = keyWords[sc[s][tok] >> 8];
          const uint4 v = d[s][tok];
          decodeWord<D>(v.x, t0, &k[tok][0]);
          decodeWord<D>(v.y, t0, &k[tok][4]);
          decodeWord<D>(v.z, t1, &k[tok][8]);
          decodeWord<D>(v.w, t1, &k[tok][12]);
        }
        if (tile + AHEAD < kTilesPerBlock)
          load(s, page, tile + AHEAD);
        else
          load(s, next, tile + AHEAD - kTilesPerBlock); // past the run: its last page again (cached)
#pragma unroll
        for (int ct = 0; ct < CT; ++ct) {
          float acc[4] = {0, 0, 0, 0};
#pragma unroll
          for (int st = 0; st < 8; ++st) {
            const uint32_t af[4] = {k[0][2 * st], k[1][2 * st], k[0][2 * st + 1], k[1][2 * st + 1]};
            mma(acc, af, bq[ct][st][0], bq[ct][st][1]);
          }
#pragma unroll
          for (int j = 0; j < 4; ++j)
            mx[ct][j] = fmaxf(mx[ct][j], acc[j]);
        }
      }
      page = next;
#pragma unroll
      for (int ct = 0; ct < CT; ++ct) { // the block's max over its 16 token slots
        float m0 = fmaxf(mx[ct][0], mx[ct][2]), m1 = fmaxf(mx[ct][1], mx[ct][3]);
        for (int o = 4; o < 32; o <<= 1) {
          m0 = fmaxf(m0, __shfl_xor_sync(0xFFFFFFFFu, m0, o));
          m1 = fmaxf(m1, __shfl_xor_sync(0xFFFFFFFFu, m1, o));
        }
        if (g == 0)
          for (int h = 0; h < 2; ++h) {
            const int c = ct * 8 + 2 * t + h;
            if (c < columns) {
              const int row = req * kRows + c / a.heads, head = c % a.heads;
              a.score[(size_t(head) * a.requests * kRows + row) * a.blocksPerReq + first + blk] = h ? m1 : m0;
            }
          }
      }
    }
    work = PERSISTENT ? nextRun() : totalRuns;
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s REQUESTS TOKENS HEADS\n", argv[0]);
    return 2;
  }
  const int requests = std::atoi(argv[1]), blocksPerReq = (std::atoi(argv[2]) + 127) / 128, heads = std::atoi(argv[3]);
  if (heads != 1 && heads != 4) {
    std::fprintf(stderr, "HEADS must be 1 or 4\n");
    return 2;
  }
  const size_t pages = size_t(requests) * blocksPerReq, bytes = pages * kPageBytes;
  const int rows = requests * kRows;
  std::mt19937 rng(40);
  // Pages: random nibbles, finite scales (bytes 0x00-0x7E and 0x80-0xFE), random e4m3 queries.
  std::vector<uint8_t> hkv(bytes);
  for (size_t p = 0; p < pages; ++p) {
    uint8_t *page = hkv.data() + p * kPageBytes;
    for (int i = 0; i < kDataBytes; i += 4) {
      const uint32_t r = rng();
      std::memcpy(page + i, &r, 4);
    }
    for (int i = kDataBytes; i < kPageBytes; ++i) {
      uint8_t s = uint8_t(rng() % 0x7F);
      page[i] = (rng() & 1) ? s : s | 0x80; // negative scales too: the table carries the sign
    }
  }
  std::vector<uint8_t> hq(size_t(rows) * heads * 128);
  for (auto &b : hq) {
    b = uint8_t(rng() % 0x7F) | ((rng() & 1) ? 0x80 : 0);
  }
  std::vector<int> order(pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));

  uint8_t *kv, *q, *flush, *copyDst;
  int *table;
  float *score;
  unsigned *ticket;
  CHECK(cudaMalloc(&kv, bytes));
  CHECK(cudaMalloc(&copyDst, bytes));
  CHECK(cudaMalloc(&q, hq.size()));
  CHECK(cudaMalloc(&table, pages * sizeof(int)));
  const size_t scoreCount = size_t(heads) * rows * blocksPerReq;
  CHECK(cudaMalloc(&score, scoreCount * sizeof(float)));
  CHECK(cudaMalloc(&ticket, sizeof(unsigned)));
  const size_t flushBytes = size_t(256) << 20;
  CHECK(cudaMalloc(&flush, flushBytes));
  CHECK(cudaMemcpy(kv, hkv.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(q, hq.data(), hq.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(table, order.data(), pages * sizeof(int), cudaMemcpyHostToDevice));

  // The reference for a sample of (head, row, block): up to 64 blocks of the first and the last
  // request, from the project's scalar SPEC §2 numerics (core/Nvfp4, compiled in by gpu.sh).
  const auto &keyBytes = m3idx::nvfp4::keyByteTable();
  auto e4m3Value = [](uint8_t b) { return double(m3idx::nvfp4::e4m3ToFloat(b)); };
  double keyOf[256][16];
  for (int s = 0; s < 256; ++s)
    for (int c = 0; c < 16; ++c)
      keyOf[s][c] = e4m3Value(keyBytes[c][s]);
  struct Sample { int head, row, block; double ref, bound; };
  std::vector<Sample> samples;
  for (int req : {0, requests - 1})
    for (int r = 0; r < kRows; ++r)
      for (int h = 0; h < heads; ++h)
        for (int b = 0; b < blocksPerReq; b += std::max(1, blocksPerReq / 64)) {
          const uint8_t *page = hkv.data() + size_t(order[size_t(req) * blocksPerReq + b]) * kPageBytes;
          const uint8_t *qr = hq.data() + (size_t(req * kRows + r) * heads + h) * 128;
          double best = -INFINITY, bound = 0;
          for (int tok = 0; tok < 128; ++tok) {
            double dot = 0, mag = 0;
            for (int dd = 0; dd < 128; ++dd) {
              const uint8_t byte = page[tok * 64 + dd / 2], nib = (dd & 1) ? byte >> 4 : byte & 15;
              const double prod = e4m3Value(qr[dd]) * keyOf[page[kDataBytes + tok * 8 + dd / 16]][nib];
              dot += prod;
              mag += std::fabs(prod);
            }
            best = std::max(best, dot);
            bound = std::max(bound, mag);
          }
          samples.push_back({h, req * kRows + r, b, best, bound});
        }

  EventTimer timer;
  timer.flush = flush;
  timer.flushBytes = flushBytes;
  int smCount = 0;
  CHECK(cudaDeviceGetAttribute(&smCount, cudaDevAttrMultiProcessorCount, 0));
  const double copyMs = timer.medianMs([&] { CHECK(cudaMemcpyAsync(copyDst, kv, bytes, cudaMemcpyDeviceToDevice)); }, 3, 30);
  const double copyRate = 2.0 * bytes / (copyMs * 1e6);
  std::printf("%d requests x %d blocks, H=%d, 4 rows: %.3f GB of index-K; copy %.3f ms = %.0f GB/s (read + write)\n",
              requests, blocksPerReq, heads, bytes / 1e9, copyMs, copyRate);

  auto run = [&](const char *name, auto kernel, int runBlocks, bool persistent, bool check) {
    Args a{kv, table, q, score, requests, blocksPerReq, heads, runBlocks, (blocksPerReq + runBlocks - 1) / runBlocks, ticket};
    int perSm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, 32, 0));
    const int totalRuns = requests * a.runsPerReq;
    const int grid = persistent ? std::min(totalRuns, perSm * smCount) : totalRuns;
    auto launch = [&] {
      if (persistent)
        CHECK(cudaMemsetAsync(ticket, 0, sizeof(unsigned)));
      kernel<<<grid, 32>>>(a);
      CHECK(cudaGetLastError());
    };
    CHECK(cudaMemset(score, 0xFF, scoreCount * sizeof(float)));
    launch();
    CHECK(cudaDeviceSynchronize());
    const char *verdict = "not checked (timing only)";
    if (check) {
      std::vector<float> hs(scoreCount);
      CHECK(cudaMemcpy(hs.data(), score, scoreCount * sizeof(float), cudaMemcpyDeviceToHost));
      int bad = 0;
      for (const Sample &s : samples) {
        const float got = hs[(size_t(s.head) * rows + s.row) * blocksPerReq + s.block];
        if (!(std::fabs(got - s.ref) <= 1e-5 * s.bound + 1e-30))
          ++bad;
      }
      static char msg[64];
      std::snprintf(msg, sizeof msg, "%d/%zu samples off", bad, samples.size());
      verdict = msg;
    }
    const double ms = timer.medianMs(launch, 3, 30);
    std::printf("  %-34s run %2d  %4d programs (%2d/SM)  %8.4f ms  %6.0f GB/s  %5.1f%% of copy  %s\n", name, runBlocks,
                grid, perSm, ms, bytes / (ms * 1e6), 100.0 * bytes / (ms * 1e6) / copyRate, verdict);
  };
  auto sweep = [&](auto ct) {
    constexpr int CT = decltype(ct)::value;
    for (int r : {4, 8})
      run("grid, exact, 1 ahead", scoreRuns<CT, 1, kExact, false>, r, false, true);
    run("grid, exact, 2 ahead", scoreRuns<CT, 2, kExact, false>, 4, false, true);
    for (int r : {1, 2, 4, 8})
      run("persistent, exact, 1 ahead", scoreRuns<CT, 1, kExact, true>, r, true, true);
    for (int r : {2, 4, 8})
      run("persistent, exact, 2 ahead", scoreRuns<CT, 2, kExact, true>, r, true, true);
    run("persistent, nosign, 2 ahead", scoreRuns<CT, 2, kNoSign, true>, 4, true, false);
    run("persistent, nodecode, 2 ahead", scoreRuns<CT, 2, kNoDecode, true>, 4, true, false);
    run("grid, nodecode, 1 ahead", scoreRuns<CT, 1, kNoDecode, false>, 4, false, false);
    run("grid, nodecode, 2 ahead", scoreRuns<CT, 2, kNoDecode, false>, 4, false, false);
  };
  if (heads == 1)
    sweep(std::integral_constant<int, 1>{});
  else
    sweep(std::integral_constant<int, 2>{});
  return 0;
}
