// How fast can the prefill score run in FlashAttention-3's layout on sm_90a, and is issue 38's
// target (a prompt step within 1.4x the f16 tensor-core floor) within reach? Hand-written, not the
// product's kernel (masks past the causal edge, sentinels and the top-k are left out): fresh
// prompts of P x L tokens, H heads, SPEC §3 pages in a shuffled order. A CTA takes 128 query
// columns (128 / H rows x H heads) and a run of blocks of one request, as three warpgroups:
//   producer   -- warpgroup 0: each thread one key token of the block; loads its 64 bytes of
//                 codes and 8 scales (the next block's while it decodes this one), decodes NVFP4 to
//                 E4M3 key bytes by a per-scale table and prmt (as score_decode does), widens them to
//                 f16 and writes the block as wgmma's B (128 tokens x 128 dims, K-major, 128-byte
//                 swizzle) into a ring of S stages, then arrives on the stage's "full" mbarrier;
//   consumers  -- warpgroups 1 and 2: 64 query columns each as wgmma's A, in registers (widened
//                 once), keys as N: 8 x m64n128k16 per block, f32 sums; the max over the block's
//                 tokens is in-thread (32 of them) then 2 shuffles; the stage is released on its
//                 "empty" mbarrier. Overlap: the next block's wgmma is issued before this block's
//                 max (two accumulator sets, setmaxnreg moving registers from the producer);
//                 or two producer warpgroups, each thread half a token (512 threads).
// Each variant's scores are compared on sampled (row, head, block) with exact (double) ones as a
// multiple of the fp32 bound the product's checker allows, then timed after an L2 flush (CUDA
// events, median of 20). Causal FLOPs = P x H x 256 x L(L+1)/2. Built with nvcc for sm_90a by
// `bash bench/gpu.sh fa3`. Usage: prefill_fa3_probe P L H [BLOCKS_PER_CTA [all]] (all: also the
// forms measured and dropped, RESULTS 2026-12-06 (8)).
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "CudaBench.cuh"
#include "Nvfp4Probe.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

namespace {

using namespace probe;

constexpr int kTokens = 128, kCols = 128;
constexpr int kStageBytes = kTokens * 128 * 2, kAtomBytes = kTokens * 128; // f16 block; one 64-dim half

__device__ __forceinline__ uint32_t smemAddr(const void *p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbarInit(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// The barrier's phase completes once `bytes` more have landed by complete_tx (and its one arrival).
__device__ __forceinline__ void mbarExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// A bulk copy global -> shared (the async proxy, as wgmma reads), completing `bytes` on `bar`.
__device__ __forceinline__ void bulkCopy(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void mbarWait(uint32_t bar, uint32_t parity) {
  asm volatile("{\n.reg .pred done;\nwait_%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra wait_%=;\n}" ::"r"(bar),
               "r"(parity)
               : "memory");
}

// The 64 f32 accumulator registers of m64n128 as read-write asm operands %0..%63.
#define ACC64(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// m64n128k16 f32 += f16 (A: 4 registers) x f16 (B: descriptor); scaleD 0 overwrites d.
__device__ __forceinline__ void wgmma128(float *d, const uint32_t *a, uint64_t desc, int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}"
      : ACC64(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scaleD));
}

// The same with A from shared memory too (both K-major: no transposes).
__device__ __forceinline__ void wgmma128ss(float *d, uint64_t descA, uint64_t descB, int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}"
      : ACC64(d)
      : "l"(descA), "l"(descB), "r"(scaleD));
}

// Waits until at most N wgmma groups are pending; d's registers are written by then (the operands
// keep the compiler from reading or moving them across the wait).
template <int N> __device__ __forceinline__ void wgmmaWait(float *d) {
  asm volatile("wgmma.wait_group.sync.aligned %64;\n"
      : ACC64(d)
      : "n"(N)
      : "memory");
}

// 16-byte chunk `chunk` (dims 8 chunk .. + 8, f16) of row `row` in a K-major, 128-byte swizzled
// operand of `rows` rows x 128 dims: two 64-dim atoms of rows x 128 bytes, rows in groups of 8
// (1024 bytes), a row's chunk c at c ^ (row % 8) -- what descAt describes.
__device__ __forceinline__ uint4 *swizzledChunk(uint8_t *base, int rows, int row, int chunk) {
  return reinterpret_cast<uint4 *>(base + (chunk / 8) * rows * 128 + (row / 8) * 1024 + (row % 8) * 128 +
                                   (((chunk % 8) ^ (row % 8)) * 16));
}

// Dims [64 * half, + 64) of token n (8 words of codes, 4 scale bytes) as f16 into atom `half` of a
// stage: B's K-major, 128-byte swizzled layout.
__device__ __forceinline__ void decodeHalf(const uint32_t (&words)[8], uint32_t scales, const uint2 *table,
                                           uint8_t *stage, int n, int half) {
#pragma unroll
  for (int gi = 0; gi < 4; ++gi) {
    const uint2 tab = table[(scales >> (8 * gi)) & 0xFF];
    uint32_t k0, k1, k2, k3;
    decodeWord(words[2 * gi], tab, k0, k1);
    decodeWord(words[2 * gi + 1], tab, k2, k3);
    const uint4 lo = {f16Pair(k0, 0), f16Pair(k0, 1), f16Pair(k1, 0), f16Pair(k1, 1)};
    const uint4 hi = {f16Pair(k2, 0), f16Pair(k2, 1), f16Pair(k3, 0), f16Pair(k3, 1)};
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *swizzledChunk(stage, kTokens, n, 8 * half + 2 * gi + h) = h ? hi : lo;
  }
}

// The same dims as f16 straight from a per-scale table of the keys' f16 bytes (low bytes in .x/.y,
// high bytes in .z/.w): two lookups and two byte interleaves per 4 codes instead of two widenings.
__device__ __forceinline__ void decodeHalf16(const uint32_t (&words)[8], uint32_t scales, const uint4 *table,
                                             uint8_t *stage, int n, int half) {
#pragma unroll
  for (int gi = 0; gi < 4; ++gi) {
    const uint4 tab = table[(scales >> (8 * gi)) & 0xFF];
    uint32_t o[8];
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      const uint32_t x = words[2 * gi + w], codes = x & 0x77777777u, even = x << 4;
#pragma unroll
      for (int e = 0; e < 2; ++e) { // codes 0-3, then 4-7
        const uint32_t sel = e ? codes >> 16 : codes;
        const uint32_t sign = prmt(even, x, e ? 0xFBEA : 0xD9C8) & 0x80808080u;
        const uint32_t lo = prmt(tab.x, tab.y, sel), hi = prmt(tab.z, tab.w, sel) ^ sign;
        o[4 * w + 2 * e] = prmt(lo, hi, 0x5140);
        o[4 * w + 2 * e + 1] = prmt(lo, hi, 0x7362);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *swizzledChunk(stage, kTokens, n, 8 * half + 2 * gi + h) = uint4{o[4 * h], o[4 * h + 1], o[4 * h + 2], o[4 * h + 3]};
  }
}

// Key bytes of the f16 table from the E4M3 one: entry s holds the 8 codes' f16 low bytes, then high.
__global__ void fillTable16(const uint8_t *table, uint8_t *table16) {
  const int s = blockIdx.x, c = threadIdx.x;
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(table[s * 8 + c]), __NV_E4M3);
  table16[s * 16 + c] = uint8_t(h.x), table16[s * 16 + 8 + c] = uint8_t(h.x >> 8);
}

struct Work {
  int req, tile, first, last; // request, row tile, blocks [first, last)
};

// A K-major, 128-byte-swizzled operand's descriptor (8-row groups 1024 bytes apart) from `start`.
__device__ __forceinline__ uint64_t descAt(uint32_t start) {
  return uint64_t((start & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

// B's descriptor at K step k of a stage.
__device__ __forceinline__ uint64_t descB(uint32_t stage, int k) {
  return descAt(stage + (k / 4) * kAtomBytes + (k % 4) * 32);
}

// A's descriptor at K step k for 64-row tile m of 256 query rows staged as B is (two 64-dim atoms).
__device__ __forceinline__ uint64_t descA256(uint32_t qs, int m, int k) {
  return descAt(qs + (k / 4) * 256 * 128 + m * 8 * 1024 + (k % 4) * 32);
}

// wgmma's A in registers for a thread's columns colA and colB (rows g and g + 8 of its warp's 16):
// K step k holds dims 16k + 2t, + 1 (registers 0, 1) and 16k + 2t + 8, + 9 (2, 3), widened to f16.
__device__ __forceinline__ void queryFragments(const uint8_t *qt, int colA, int colB, int t, uint32_t (&a)[8][4]) {
  auto qPair = [&](int col, int dim) {
    return f16Pair(uint32_t(qt[col * 128 + dim]) | (uint32_t(qt[col * 128 + dim + 1]) << 8), 0);
  };
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    a[k][0] = qPair(colA, 16 * k + 2 * t);
    a[k][1] = qPair(colB, 16 * k + 2 * t);
    a[k][2] = qPair(colA, 16 * k + 2 * t + 8);
    a[k][3] = qPair(colB, 16 * k + 2 * t + 8);
  }
}

// The max over a block's 128 tokens of a thread's two columns (rows g and g + 8 of its warp's 16
// accumulator rows; tokens 8j + 2t + e), tokens past a row's causal edge left out where `masked`,
// then over the quad: every lane of the quad holds both maxima.
__device__ __forceinline__ void blockMax(const float *acc, int base, bool masked, int rowA, int rowB, int t,
                                         float &mA, float &mB) {
  mA = -INFINITY, mB = -INFINITY;
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int tok = base + 8 * j + 2 * t + e;
      if (!masked || tok <= rowA)
        mA = fmaxf(mA, acc[4 * j + e]);
      if (!masked || tok <= rowB)
        mB = fmaxf(mB, acc[4 * j + 2 + e]);
    }
  for (int x = 1; x < 4; x *= 2) {
    mA = fmaxf(mA, __shfl_xor_sync(0xffffffffu, mA, x));
    mB = fmaxf(mB, __shfl_xor_sync(0xffffffffu, mB, x));
  }
}

// SPEC §5's key of a block's score: NaN as -inf, -0 as +0, order-preserving bits, block id low.
__device__ __forceinline__ uint64_t scoreKey(float v, int blk) {
  uint32_t u = __float_as_uint(v != v ? -INFINITY : v + 0.0f);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (uint64_t(u) << 32) | uint32_t(blk);
}

// The least of the quad's (4 lanes') values.
__device__ __forceinline__ uint64_t overQuad(uint64_t m) {
  for (int x = 1; x < 4; x *= 2) {
    const uint64_t o = __shfl_xor_sync(0xffffffffu, m, x);
    m = o < m ? o : m;
  }
  return m;
}

// A column's running top-16 over a quad (4 lanes, 4 slots each; 0 = empty, below every key). Every
// lane of the warp calls it (the ballot); `key` is the quad's.
__device__ __forceinline__ void topkInsert(uint64_t (&slots)[4], uint64_t key, int lane) {
  uint64_t m = slots[0];
  int mi = 0;
#pragma unroll
  for (int j = 1; j < 4; ++j)
    if (slots[j] < m)
      m = slots[j], mi = j;
  const uint64_t qm = overQuad(m);
  const unsigned mine = __ballot_sync(0xffffffffu, m == qm), quad = (mine >> (lane & ~3)) & 0xF;
  const bool owner = (m == qm) && (quad & ((1u << (lane & 3)) - 1)) == 0;
  if (owner && key > qm)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (j == mi)
        slots[j] = key;
}

// A form of the kernel. producers: 1 warpgroup (each thread a token) or 2 (each thread half a
// token: twice the warps to hide the decode's latency). overlap: the next block's wgmma before this
// block's max (setmaxnreg). f16Table: keys decoded by the f16 table (decodeHalf16). decode false:
// the consumers' and the ring's ceiling (stale keys); consume false: the producers' (no wgmma).
// cols 256: each consumer warpgroup 128 query columns as two m64 tiles, A from shared memory (the
// queries staged once, f16, swizzled as B is), so a decoded block feeds twice the tensor work.
// image: the keys decoded once before (predecode: each page's stage image, f16, swizzled, in global
// memory); one producer thread bulk-copies a block's image into the ring (no decode per row tile).
// (Outside the anonymous namespace: nvcc's host stubs name a class-type template argument's type,
// which they cannot do for one declared there.)
} // namespace
struct Form {
  int stages, producers = 1;
  bool overlap = false, f16Table = false, decode = true, consume = true, fused = false;
  int cols = 128;
  bool image = false;
};
namespace {

template <Form F>
__global__ void __launch_bounds__(128 * (F.producers + 2), 1)
    scoreFa3(const uint8_t *kv, const int *pageTable, const uint8_t *q, const uint8_t *tableG, const Work *work,
             int L, int H, int bpr, int width, size_t numRows, float *scores, int *topk) {
  constexpr int S = F.stages, PW = F.producers;
  constexpr bool Overlap = F.overlap, Fused = F.fused;
  // setmaxnreg moves registers within what the launch allocated (a sum above it waits forever):
  // 384 x 168 >= 128 x 56 + 256 x 224 (two accumulator sets) or 128 x 64 + 256 x 216 (one, wide);
  // 512 x 128 = 256 x 72 + 256 x 184.
  constexpr int kProducerRegs = PW == 2 ? 72 : Overlap ? 56 : 64, kConsumerRegs = PW == 2 ? 184 : Overlap ? 224 : 216;
  constexpr bool kMoveRegs = Overlap || F.cols == 256;
  extern __shared__ uint8_t raw[];
  uint8_t *smem = raw + ((1024 - (smemAddr(raw) & 1023)) & 1023);
  const uint32_t ring = smemAddr(smem);
  uint2 *table = reinterpret_cast<uint2 *>(smem + S * kStageBytes); // E4M3 (2 KB) or f16 (4 KB)
  const uint32_t bars = smemAddr(smem + S * kStageBytes + 4096); // full[S], then empty[S]
  const int tid = threadIdx.x;
  if (tid == 0)
    for (int s = 0; s < S; ++s) {
      mbarInit(bars + 8 * s, F.image ? 1 : 128 * PW); // full: every producer thread, or the copier
      mbarInit(bars + 8 * (S + s), 8); // empty: each consumer warp
    }
  for (int i = tid; i < (F.f16Table ? 512 : 256); i += blockDim.x)
    table[i] = reinterpret_cast<const uint2 *>(tableG)[i];
  __syncthreads();
  const Work w = work[blockIdx.x];
  const int nblk = w.last - w.first, rowsPerTile = F.cols / H, r0 = w.tile * rowsPerTile;
  auto decode = [&](const uint32_t (&words)[8], uint32_t sc, uint8_t *stage, int n, int half) {
    if constexpr (!F.decode)
      return;
    else if constexpr (F.f16Table)
      decodeHalf16(words, sc, reinterpret_cast<const uint4 *>(table), stage, n, half);
    else
      decodeHalf(words, sc, table, stage, n, half);
  };
  if (F.image && tid < 128) { // producer: thread 0 copies each block's image (kv is the images)
    if constexpr (kMoveRegs)
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
    if (tid == 0)
      for (int i = 0; i < nblk; ++i) {
        const int s = i % S;
        if (i >= S)
          mbarWait(bars + 8 * (S + s), ((i / S) - 1) & 1);
        const uint8_t *src = kv + size_t(pageTable[w.req * bpr + w.first + i]) * kStageBytes;
        mbarExpectTx(bars + 8 * s, kStageBytes);
        for (int c = 0; c < 4; ++c)
          bulkCopy(ring + s * kStageBytes + c * (kStageBytes / 4), src + c * (kStageBytes / 4), kStageBytes / 4,
                   bars + 8 * s);
      }
    return;
  }
  if (PW == 2 && tid < 256) { // producer, half a token a thread
    if constexpr (kMoveRegs)
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
    const int n = tid / 2, half = tid % 2;
    auto load = [&](int i, uint4 &d0, uint4 &d1, uint32_t &sc) {
      const uint8_t *page = kv + size_t(pageTable[w.req * bpr + w.first + i]) * kPageBytes;
      const uint4 *dp = reinterpret_cast<const uint4 *>(page + n * 64 + half * 32);
      d0 = __ldg(dp), d1 = __ldg(dp + 1);
      sc = __ldg(reinterpret_cast<const uint32_t *>(page + kDataBytes + n * 8 + half * 4));
    };
    uint4 d0, d1, n0, n1;
    uint32_t sc, nsc;
    load(0, d0, d1, sc);
    for (int i = 0; i < nblk; ++i) {
      const int s = i % S;
      if (i + 1 < nblk)
        load(i + 1, n0, n1, nsc);
      if (i >= S)
        mbarWait(bars + 8 * (S + s), ((i / S) - 1) & 1);
      const uint32_t words[8] = {d0.x, d0.y, d0.z, d0.w, d1.x, d1.y, d1.z, d1.w};
      decode(words, sc, smem + s * kStageBytes, n, half);
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      mbarArrive(bars + 8 * s);
      d0 = n0, d1 = n1, sc = nsc;
    }
    return;
  }
  if (PW == 1 && tid < 128) { // producer
    if constexpr (kMoveRegs)
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
    const int n = tid;
    auto load = [&](int i, uint4 *d, uint2 &sc) {
      const uint8_t *page = kv + size_t(pageTable[w.req * bpr + w.first + i]) * kPageBytes;
      const uint4 *dp = reinterpret_cast<const uint4 *>(page + n * 64);
      for (int j = 0; j < 4; ++j)
        d[j] = __ldg(dp + j);
      sc = __ldg(reinterpret_cast<const uint2 *>(page + kDataBytes + n * 8));
    };
    uint4 d[4], dn[4];
    uint2 sc, scn;
    load(0, d, sc);
    for (int i = 0; i < nblk; ++i) {
      const int s = i % S;
      if (i + 1 < nblk)
        load(i + 1, dn, scn);
      if (i >= S)
        mbarWait(bars + 8 * (S + s), ((i / S) - 1) & 1);
      uint8_t *stage = smem + s * kStageBytes;
      const uint32_t lo[8] = {d[0].x, d[0].y, d[0].z, d[0].w, d[1].x, d[1].y, d[1].z, d[1].w};
      const uint32_t hi[8] = {d[2].x, d[2].y, d[2].z, d[2].w, d[3].x, d[3].y, d[3].z, d[3].w};
      decode(lo, sc.x, stage, n, 0);
      decode(hi, sc.y, stage, n, 1);
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      mbarArrive(bars + 8 * s);
      if (i + 1 < nblk) {
        for (int j = 0; j < 4; ++j)
          d[j] = dn[j];
        sc = scn;
      }
    }
    return;
  }
  // consumers
  if constexpr (kMoveRegs)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegs));
  const int ct = tid - 128 * PW, wg = ct / 128, warp = (ct % 128) / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  if constexpr (F.cols == 256) {
    // The queries once: column ct's 128 bytes widened to f16 into the swizzled A buffer.
    uint8_t *qs = smem + S * kStageBytes + 4096 + 1024;
    const uint8_t *qt = q + (size_t(w.req) * L + r0) * H * 128 + size_t(ct) * 128;
#pragma unroll
    for (int c = 0; c < 16; ++c) {
      const uint2 b8 = *reinterpret_cast<const uint2 *>(qt + 8 * c);
      *swizzledChunk(qs, 256, ct, c) = uint4{f16Pair(b8.x, 0), f16Pair(b8.x, 1), f16Pair(b8.y, 0), f16Pair(b8.y, 1)};
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("bar.sync 1, 256;" ::: "memory"); // the consumers only
    const uint32_t qsAddr = smemAddr(qs);
    float acc[2][64];
    for (int i = 0; i < nblk; ++i) {
      const uint32_t stage = ring + (i % S) * kStageBytes;
      mbarWait(bars + 8 * (i % S), (i / S) & 1);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int k = 0; k < 8; ++k)
#pragma unroll
        for (int m = 0; m < 2; ++m)
          wgmma128ss(acc[m], descA256(qsAddr, 2 * wg + m, k), descB(stage, k), k > 0);
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      wgmmaWait<0>(acc[0]);
      wgmmaWait<0>(acc[1]);
      __syncwarp();
      if (lane == 0)
        mbarArrive(bars + 8 * (S + i % S));
      const int blk = w.first + i, base = blk * kTokens;
      const bool masked = base + kTokens - 1 > r0;
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        const int colA = 128 * wg + 64 * m + 16 * warp + g, colB = colA + 8;
        const int rowA = r0 + colA / H, rowB = r0 + colB / H;
        float mA, mB;
        blockMax(acc[m], base, masked, rowA, rowB, t, mA, mB);
        if (t == 0) {
          if (base <= rowA)
            scores[(size_t(colA % H) * numRows + size_t(w.req) * L + rowA) * width + blk] = mA;
          if (base <= rowB)
            scores[(size_t(colB % H) * numRows + size_t(w.req) * L + rowB) * width + blk] = mB;
        }
      }
    }
    return;
  }
  const int colA = 64 * wg + 16 * warp + g, colB = colA + 8;
  const int rowA = r0 + colA / H, rowB = r0 + colB / H, headA = colA % H, headB = colB % H;
  uint32_t a[8][4];
  queryFragments(q + (size_t(w.req) * L + r0) * H * 128, colA, colB, t, a);
  auto issue = [&](int i, float *acc) {
    const uint32_t stage = ring + (i % S) * kStageBytes;
    mbarWait(bars + 8 * (i % S), (i / S) & 1);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int k = 0; k < 8; ++k)
      wgmma128(acc, a[k], descB(stage, k), k > 0);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  };
  uint64_t slotsA[4] = {0, 0, 0, 0}, slotsB[4] = {0, 0, 0, 0}, thrA = 0, thrB = 0;
  auto quadMin = [&](const uint64_t (&sl)[4]) {
    uint64_t m = sl[0];
    for (int j = 1; j < 4; ++j)
      m = sl[j] < m ? sl[j] : m;
    return overQuad(m);
  };
  auto finish = [&](int i, const float *acc) {
    __syncwarp();
    if (lane == 0)
      mbarArrive(bars + 8 * (S + i % S));
    const int blk = w.first + i, base = blk * kTokens;
    const bool masked = base + kTokens - 1 > r0; // some row of the tile sees part of the block
    float mA, mB;
    blockMax(acc, base, masked, rowA, rowB, t, mA, mB);
    if constexpr (Fused) {
      // invisible blocks (past a row's causal edge) are no candidates
      const bool anyA = __any_sync(0xffffffffu, base <= rowA && scoreKey(mA, blk) > thrA);
      const bool anyB = __any_sync(0xffffffffu, base <= rowB && scoreKey(mB, blk) > thrB);
      if (anyA) {
        topkInsert(slotsA, base <= rowA ? scoreKey(mA, blk) : 0, lane);
        thrA = quadMin(slotsA);
      }
      if (anyB) {
        topkInsert(slotsB, base <= rowB ? scoreKey(mB, blk) : 0, lane);
        thrB = quadMin(slotsB);
      }
    } else if (t == 0) {
      if (base <= rowA)
        scores[(size_t(headA) * numRows + size_t(w.req) * L + rowA) * width + blk] = mA;
      if (base <= rowB)
        scores[(size_t(headB) * numRows + size_t(w.req) * L + rowB) * width + blk] = mB;
    }
  };
  float acc0[64], acc1[64];
  if constexpr (!F.consume) {
    for (int i = 0; i < nblk; ++i) {
      mbarWait(bars + 8 * (i % S), (i / S) & 1);
      __syncwarp();
      if (lane == 0)
        mbarArrive(bars + 8 * (S + i % S));
    }
  } else if constexpr (!Overlap) {
    for (int i = 0; i < nblk; ++i) {
      issue(i, acc0);
      wgmmaWait<0>(acc0);
      finish(i, acc0);
    }
  } else {
    // Steady state without conditions (ptxas tracks which group each wait retires), then the tail.
    issue(0, acc0);
    int i = 0;
    for (; i + 2 < nblk; i += 2) {
      issue(i + 1, acc1);
      wgmmaWait<1>(acc0);
      finish(i, acc0);
      issue(i + 2, acc0);
      wgmmaWait<1>(acc1);
      finish(i + 1, acc1);
    }
    if (i + 1 < nblk) {
      issue(i + 1, acc1);
      wgmmaWait<1>(acc0);
      finish(i, acc0);
      wgmmaWait<0>(acc1);
      finish(i + 1, acc1);
    } else {
      wgmmaWait<0>(acc0);
      finish(i, acc0);
    }
  }
  if constexpr (Fused) { // the quad's 16 keys, sorted by lane t == 0 (once a CTA)
    uint64_t all[2][16];
    for (int c = 0; c < 2; ++c)
      for (int j = 0; j < 4; ++j)
        for (int src = 0; src < 4; ++src)
          all[c][4 * src + j] = __shfl_sync(0xffffffffu, c ? slotsB[j] : slotsA[j], (lane & ~3) + src);
    if (t == 0)
      for (int c = 0; c < 2; ++c) {
        uint64_t *k = all[c];
        for (int x = 1; x < 16; ++x)
          for (int y = x; y > 0 && k[y] > k[y - 1]; --y) {
            const uint64_t tmp = k[y];
            k[y] = k[y - 1], k[y - 1] = tmp;
          }
        const int row = c ? rowB : rowA, head = c ? headB : headA;
        int *o = topk + (size_t(head) * numRows + size_t(w.req) * L + row) * 16;
        for (int x = 0; x < 16; ++x)
          o[x] = k[x] ? int(uint32_t(k[x])) : -1;
      }
  }
}

// Each page's stage image (what the producer writes into the ring), once: a thread a token.
__global__ void __launch_bounds__(128) predecode(const uint8_t *kv, const uint8_t *tableG, uint8_t *image) {
  __shared__ uint2 table[256];
  const int n = threadIdx.x;
  for (int i = n; i < 256; i += 128)
    table[i] = reinterpret_cast<const uint2 *>(tableG)[i];
  __syncthreads();
  const uint8_t *page = kv + size_t(blockIdx.x) * kPageBytes;
  const uint4 *dp = reinterpret_cast<const uint4 *>(page + n * 64);
  const uint4 d0 = __ldg(dp), d1 = __ldg(dp + 1), d2 = __ldg(dp + 2), d3 = __ldg(dp + 3);
  const uint2 sc = __ldg(reinterpret_cast<const uint2 *>(page + kDataBytes + n * 8));
  const uint32_t lo[8] = {d0.x, d0.y, d0.z, d0.w, d1.x, d1.y, d1.z, d1.w};
  const uint32_t hi[8] = {d2.x, d2.y, d2.z, d2.w, d3.x, d3.y, d3.z, d3.w};
  uint8_t *out = image + size_t(blockIdx.x) * kStageBytes;
  decodeHalf(lo, sc.x, table, out, n, 0);
  decodeHalf(hi, sc.y, table, out, n, 1);
}

// One group, software-pipelined: 2 warpgroups (64 columns each) both decode (each thread half a
// token) and run wgmma; block i's wgmma runs while block i + 1 is decoded into the other stage.
__global__ void __launch_bounds__(256, 1)
    scoreInterleaved(const uint8_t *kv, const int *pageTable, const uint8_t *q, const uint8_t *tableG,
                     const Work *work, int L, int H, int bpr, int width, size_t numRows, float *scores) {
  extern __shared__ uint8_t raw[];
  uint8_t *smem = raw + ((1024 - (smemAddr(raw) & 1023)) & 1023);
  const uint32_t ring = smemAddr(smem);
  uint2 *table = reinterpret_cast<uint2 *>(smem + 2 * kStageBytes);
  const int tid = threadIdx.x;
  for (int i = tid; i < 256; i += blockDim.x)
    table[i] = reinterpret_cast<const uint2 *>(tableG)[i];
  const Work w = work[blockIdx.x];
  const int nblk = w.last - w.first, rowsPerTile = kCols / H, r0 = w.tile * rowsPerTile;
  const int wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int n = tid / 2, half = tid % 2;
  const int colA = 64 * wg + 16 * warp + g, colB = colA + 8;
  const int rowA = r0 + colA / H, rowB = r0 + colB / H, headA = colA % H, headB = colB % H;
  uint32_t a[8][4];
  queryFragments(q + (size_t(w.req) * L + r0) * H * 128, colA, colB, t, a);
  auto load = [&](int i, uint4 &d0, uint4 &d1, uint32_t &sc) {
    const uint8_t *page = kv + size_t(pageTable[w.req * bpr + w.first + i]) * kPageBytes;
    const uint4 *dp = reinterpret_cast<const uint4 *>(page + n * 64 + half * 32);
    d0 = __ldg(dp), d1 = __ldg(dp + 1);
    sc = __ldg(reinterpret_cast<const uint32_t *>(page + kDataBytes + n * 8 + half * 4));
  };
  auto decode = [&](int i, const uint4 &d0, const uint4 &d1, uint32_t sc) {
    const uint32_t words[8] = {d0.x, d0.y, d0.z, d0.w, d1.x, d1.y, d1.z, d1.w};
    decodeHalf(words, sc, table, smem + (i % 2) * kStageBytes, n, half);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  };
  uint4 d0, d1;
  uint32_t sc;
  load(0, d0, d1, sc);
  __syncthreads(); // the table
  decode(0, d0, d1, sc);
  if (nblk > 1)
    load(1, d0, d1, sc);
  __syncthreads();
  float acc[64];
  for (int i = 0; i < nblk; ++i) {
    const uint32_t stage = ring + (i % 2) * kStageBytes;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int k = 0; k < 8; ++k)
      wgmma128(acc, a[k], descB(stage, k), k > 0);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    if (i + 1 < nblk) {
      decode(i + 1, d0, d1, sc);
      if (i + 2 < nblk)
        load(i + 2, d0, d1, sc);
    }
    wgmmaWait<0>(acc);
    __syncthreads(); // block i + 1 is staged; block i's stage is free
    const int blk = w.first + i, base = blk * kTokens;
    const bool masked = base + kTokens - 1 > r0;
    float mA, mB;
    blockMax(acc, base, masked, rowA, rowB, t, mA, mB);
    if (t == 0) {
      if (base <= rowA)
        scores[(size_t(headA) * numRows + size_t(w.req) * L + rowA) * width + blk] = mA;
      if (base <= rowB)
        scores[(size_t(headB) * numRows + size_t(w.req) * L + rowB) * width + blk] = mB;
    }
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: prefill_fa3_probe P L H [BLOCKS_PER_CTA [all]]\n");
    return 2;
  }
  const int P = std::atoi(argv[1]), L = std::atoi(argv[2]), H = std::atoi(argv[3]);
  const int bpp = argc > 4 ? std::atoi(argv[4]) : 16;
  if (L % kTokens || (H != 1 && H != 2 && H != 4)) {
    std::fprintf(stderr, "L must be a multiple of 128 and H 1, 2 or 4\n");
    return 2;
  }
  const int bpr = L / kTokens, width = bpr, rowsPerTile = kCols / H;
  if (L % (256 / H)) {
    std::fprintf(stderr, "L must be a multiple of 256 / H\n");
    return 2;
  }
  const size_t numRows = size_t(P) * L, pages = size_t(P) * bpr, kvBytes = pages * kPageBytes;
  std::vector<int> order(pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  std::vector<uint8_t> qh(numRows * H * 128);
  for (size_t i = 0; i < qh.size(); ++i) {
    uint8_t b = uint8_t(mix(i + 77));
    qh[i] = (b & 0x7F) == 0x7F ? b ^ 1 : b; // no NaN queries
  }
  // Work: (request, row tile, a run of bpp blocks), the tiles that see most first; row tiles of
  // 128 / H rows (work) or 256 / H (wide).
  auto makeWork = [&](int tileRows) {
    std::vector<Work> list;
    for (int tile = L / tileRows - 1; tile >= 0; --tile)
      for (int req = 0; req < P; ++req) {
        const int blocks = (tile * tileRows + tileRows - 1) / kTokens + 1;
        for (int f = 0; f < blocks; f += bpp)
          list.push_back({req, tile, f, std::min(f + bpp, blocks)});
      }
    return list;
  };
  const std::vector<Work> work = makeWork(rowsPerTile), wide = makeWork(2 * rowsPerTile);
  uint8_t *kv, *q, *table, *table16, *flush, *image;
  int *pt;
  Work *wd, *wdWide;
  float *out;
  const size_t outN = size_t(H) * numRows * width, flushBytes = size_t(512) << 20;
  CHECK(cudaMalloc(&kv, kvBytes));
  CHECK(cudaMalloc(&image, pages * kStageBytes));
  CHECK(cudaMalloc(&q, qh.size()));
  CHECK(cudaMalloc(&table, 256 * 8));
  CHECK(cudaMalloc(&table16, 256 * 16));
  CHECK(cudaMalloc(&flush, flushBytes));
  CHECK(cudaMalloc(&pt, pages * sizeof(int)));
  CHECK(cudaMalloc(&wd, work.size() * sizeof(Work)));
  CHECK(cudaMalloc(&wdWide, wide.size() * sizeof(Work)));
  CHECK(cudaMemcpy(wdWide, wide.data(), wide.size() * sizeof(Work), cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&out, outN * sizeof(float)));
  CHECK(cudaMemcpy(q, qh.data(), qh.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(pt, order.data(), pages * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(wd, work.data(), work.size() * sizeof(Work), cudaMemcpyHostToDevice));
  fillPages<<<4096, 256>>>(kv, kvBytes);
  fillTable<<<256, 8>>>(table);
  fillTable16<<<256, 8>>>(table, table16);
  CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> th(256 * 8);
  CHECK(cudaMemcpy(th.data(), table, th.size(), cudaMemcpyDeviceToHost));

  // Sampled (row, head, block) of request 0 and P - 1: the diagonal blocks and random ones.
  struct Sample {
    int req, row, head, blk;
  };
  std::vector<Sample> samples;
  std::mt19937 rng(11);
  for (int i = 0; i < 96; ++i) {
    const int req = i % 2 ? P - 1 : 0, row = int(rng() % L), head = int(rng() % H);
    samples.push_back({req, row, head, i % 3 ? int(rng() % (row / kTokens + 1)) : row / kTokens});
  }
  std::vector<uint8_t> pageBytes(kPageBytes);
  std::vector<double> exact(samples.size()), bound(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample &s = samples[i];
    CHECK(cudaMemcpy(pageBytes.data(), kv + size_t(order[s.req * bpr + s.blk]) * kPageBytes, kPageBytes,
                     cudaMemcpyDeviceToHost));
    double best = -INFINITY, b = 0;
    for (int tok = 0; tok < kTokens && s.blk * kTokens + tok <= s.row; ++tok) {
      double dot = 0, abs = 0;
      for (int d = 0; d < 128; ++d) {
        const uint8_t nib = (pageBytes[tok * 64 + d / 2] >> (4 * (d % 2))) & 15;
        const uint8_t key = th[pageBytes[kDataBytes + tok * 8 + d / 16] * 8 + (nib & 7)] ^ ((nib & 8) ? 0x80 : 0);
        const double p = double(e4m3(key)) * e4m3(qh[((size_t(s.req) * L + s.row) * H + s.head) * 128 + d]);
        dot += p, abs += std::fabs(p);
      }
      best = std::max(best, dot), b = std::max(b, abs * 128 * 0x1p-24);
    }
    exact[i] = best, bound[i] = b + std::fabs(best) * 0x1p-24;
  }
  const double flop = double(P) * H * 256.0 * double(L) * (L + 1) / 2;
  std::printf("prefill %d x %d, H=%d: %zu CTAs of up to %d blocks, causal %.3f TFLOP\n", P, L, H, work.size(), bpp,
              flop / 1e12);

  EventTimer timer;
  timer.flush = flush, timer.flushBytes = flushBytes;
  auto runVariant = [&](const char *name, auto kernel, int stages, int threads = 384, bool checked = true,
                        const uint8_t *tab = nullptr, int cols = 128, const uint8_t *keys = nullptr) {
    tab = tab ? tab : table;
    keys = keys ? keys : kv;
    const int smemBytes = stages * kStageBytes + 4096 + 1024 + (cols == 256 ? 65536 : 64) + 1024;
    const size_t ctas = cols == 256 ? wide.size() : work.size();
    const Work *wl = cols == 256 ? wdWide : wd;
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smemBytes));
    auto launch = [&] {
      if constexpr (std::is_same_v<decltype(kernel), decltype(&scoreInterleaved)>)
        kernel<<<ctas, threads, smemBytes>>>(keys, pt, q, tab, wl, L, H, bpr, width, numRows, out);
      else
        kernel<<<ctas, threads, smemBytes>>>(keys, pt, q, tab, wl, L, H, bpr, width, numRows, out, nullptr);
    };
    CHECK(cudaMemset(out, 0xFF, outN * sizeof(float)));
    launch();
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    double worst = 0;
    size_t over = 0;
    for (size_t i = 0; i < samples.size(); ++i) {
      const Sample &s = samples[i];
      float got;
      CHECK(cudaMemcpy(&got, out + (size_t(s.head) * numRows + size_t(s.req) * L + s.row) * width + s.blk,
                       sizeof(float), cudaMemcpyDeviceToHost));
      const double r = std::isnan(got) ? INFINITY : std::fabs(got - exact[i]) / bound[i];
      worst = std::max(worst, r);
      over += !(r <= 1);
    }
    const double ms = timer.medianMs(launch, 2);
    CHECK(cudaGetLastError());
    if (checked)
      std::printf("  %-30s %.3f ms, %.0f TFLOP/s causal; %zu samples, error / fp32 bound worst %.3f, %zu over 1\n",
                  name, ms, flop / (ms * 1e9), samples.size(), worst, over);
    else
      std::printf("  %-30s %.3f ms, %.0f TFLOP/s causal (scores unchecked)\n", name, ms, flop / (ms * 1e9));
  };
  const bool all = argc > 5 && std::strcmp(argv[5], "all") == 0; // else the forms still in question
  if (all) {
    runVariant("2 stages", scoreFa3<Form{2}>, 2);
    runVariant("2 stages, overlap", scoreFa3<Form{2, 1, true}>, 2);
    runVariant("4 stages, overlap", scoreFa3<Form{4, 1, true}>, 4);
    runVariant("one group, 2 stages", scoreInterleaved, 2, 256);
  }
  runVariant("3 stages", scoreFa3<Form{3}>, 3);
  runVariant("3 stages, overlap", scoreFa3<Form{3, 1, true}>, 3);
  runVariant("3, overlap, no decode", scoreFa3<Form{3, 1, true, false, false}>, 3, 384, false);
  runVariant("3, decode only", scoreFa3<Form{3, 1, false, false, true, false}>, 3, 384, false);
  runVariant("3, f16 table", scoreFa3<Form{3, 1, false, true}>, 3, 384, true, table16);
  runVariant("3, overlap, f16 table", scoreFa3<Form{3, 1, true, true}>, 3, 384, true, table16);
  runVariant("3, f16 table, decode only", scoreFa3<Form{3, 1, false, true, true, false}>, 3, 384, false, table16);
  runVariant("3, 2 producers", scoreFa3<Form{3, 2}>, 3, 512);
  runVariant("4, 2 producers", scoreFa3<Form{4, 2}>, 4, 512);
  runVariant("3, 2 producers, overlap", scoreFa3<Form{3, 2, true}>, 3, 512);
  runVariant("3, 2 producers, f16 table", scoreFa3<Form{3, 2, false, true}>, 3, 512, true, table16);
  runVariant("3, 2 prod, overlap, f16 table", scoreFa3<Form{3, 2, true, true}>, 3, 512, true, table16);
  runVariant("3, 2 producers, decode only", scoreFa3<Form{3, 2, false, false, true, false}>, 3, 512, false);
  runVariant("3, 2 prod, f16, decode only", scoreFa3<Form{3, 2, false, true, true, false}>, 3, 512, false, table16);
  // 256 columns a CTA (the wide work list): Form{stages, producers, overlap, f16Table, decode,
  // consume, fused, cols}
  runVariant("wide, 3 stages", scoreFa3<Form{3, 1, false, false, true, true, false, 256}>, 3, 384, true,
             nullptr, 256);
  runVariant("wide, 4 stages", scoreFa3<Form{4, 1, false, false, true, true, false, 256}>, 4, 384, true,
             nullptr, 256);
  runVariant("wide, 3, f16 table", scoreFa3<Form{3, 1, false, true, true, true, false, 256}>, 3, 384, true,
             table16, 256);
  runVariant("wide, 3, 2 producers", scoreFa3<Form{3, 2, false, false, true, true, false, 256}>, 3, 512, true,
             nullptr, 256);
  runVariant("wide, 3, 2 prod, f16 table", scoreFa3<Form{3, 2, false, true, true, true, false, 256}>, 3, 512,
             true, table16, 256);
  // Keys decoded once a step (predecode, timed alone), then copied per block: 128 and 256 columns.
  const double predecodeMs = timer.medianMs([&] { predecode<<<pages, 128>>>(kv, table, image); }, 2);
  CHECK(cudaGetLastError());
  std::printf("  %-30s %.3f ms (%zu pages, %.1f MB of images)\n", "predecode", predecodeMs, pages,
              pages * double(kStageBytes) / 1e6);
  runVariant("image, 3 stages", scoreFa3<Form{3, 1, false, false, true, true, false, 128, true}>, 3, 384, true,
             nullptr, 128, image);
  runVariant("image, 4 stages", scoreFa3<Form{4, 1, false, false, true, true, false, 128, true}>, 4, 384, true,
             nullptr, 128, image);
  runVariant("image, 3, overlap", scoreFa3<Form{3, 1, true, false, true, true, false, 128, true}>, 3, 384, true,
             nullptr, 128, image);
  runVariant("wide image, 3 stages", scoreFa3<Form{3, 1, false, false, true, true, false, 256, true}>, 3, 384, true,
             nullptr, 256, image);
  runVariant("wide image, 4 stages", scoreFa3<Form{4, 1, false, false, true, true, false, 256, true}>, 4, 384, true,
             nullptr, 256, image);
  runVariant("wide, 3, no decode", scoreFa3<Form{3, 1, false, false, false, true, false, 256}>, 3, 384, false,
             nullptr, 256);
  if (!all)
    return 0;

  // The top-16 fused into the score: a CTA takes a row tile's every block and keeps each column's
  // 16 best keys in its quad; checked against the top-16 of the scores just written (the same
  // sums, so the same ids) on sampled rows.
  std::vector<Work> whole;
  for (int tile = L / rowsPerTile - 1; tile >= 0; --tile)
    for (int req = 0; req < P; ++req)
      whole.push_back({req, tile, 0, (tile * rowsPerTile + rowsPerTile - 1) / kTokens + 1});
  Work *wholeD;
  int *topk;
  const size_t topkN = size_t(H) * numRows * 16;
  CHECK(cudaMalloc(&wholeD, whole.size() * sizeof(Work)));
  CHECK(cudaMalloc(&topk, topkN * sizeof(int)));
  CHECK(cudaMemcpy(wholeD, whole.data(), whole.size() * sizeof(Work), cudaMemcpyHostToDevice));
  auto fused = scoreFa3<Form{3, 1, true, false, true, true, true}>;
  const int smemBytes = 3 * kStageBytes + 4096 + 1024 + 64;
  CHECK(cudaFuncSetAttribute(fused, cudaFuncAttributeMaxDynamicSharedMemorySize, smemBytes));
  auto launchFused = [&] {
    fused<<<whole.size(), 384, smemBytes>>>(kv, pt, q, table, wholeD, L, H, bpr, width, numRows, out, topk);
  };
  CHECK(cudaMemset(topk, 0x7F, topkN * sizeof(int)));
  launchFused();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  size_t wrong = 0, checkedRows = 0;
  std::vector<float> rowScores(width);
  std::vector<int> got(16);
  for (int i = 0; i < 512; ++i) {
    const size_t row = rng() % numRows;
    const int head = int(rng() % H), nblk = int(row % L) / kTokens + 1;
    CHECK(cudaMemcpy(rowScores.data(), out + (size_t(head) * numRows + row) * width, width * sizeof(float),
                     cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(got.data(), topk + (size_t(head) * numRows + row) * 16, 16 * sizeof(int), cudaMemcpyDeviceToHost));
    std::vector<uint64_t> keys;
    for (int b = 0; b < nblk; ++b) {
      float v = rowScores[b];
      uint32_t u;
      v = std::isnan(v) ? -INFINITY : v + 0.0f;
      std::memcpy(&u, &v, 4);
      u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
      keys.push_back((uint64_t(u) << 32) | uint32_t(b));
    }
    std::sort(keys.rbegin(), keys.rend());
    for (int x = 0; x < 16; ++x)
      wrong += got[x] != (x < nblk ? int(uint32_t(keys[x])) : -1);
    ++checkedRows;
  }
  const double ms = timer.medianMs(launchFused, 2);
  CHECK(cudaGetLastError());
  std::printf("  %-22s %.3f ms, %.0f TFLOP/s causal; %zu CTAs; top-16 of %zu sampled rows: %zu ids differ\n",
              "fused top-16 (3, ovl)", ms, flop / (ms * 1e9), whole.size(), checkedRows, wrong);
  return 0;
}
