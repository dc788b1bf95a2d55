#include "casefile/CaseGenerator.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/Nvfp4.h"
#include "core/Nvfp4Writer.h"
#include "core/Spec.h"

namespace m3idx {

namespace {

// std's distributions are implementation-defined; these keep a seed's case the same everywhere.
class Rng {
public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  uint64_t bits() { return engine_(); }
  int64_t uniform(int64_t lo, int64_t hi) { // inclusive
    return lo + static_cast<int64_t>(bits() % static_cast<uint64_t>(hi - lo + 1));
  }
  double unit() { return (bits() >> 11) * 0x1.0p-53; }
  double normal() { // Box-Muller
    double u1 = std::max(unit(), 1e-300), u2 = unit();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

private:
  std::mt19937_64 engine_;
};

// Exact mode. Query bytes: 0 or +-(1 + m/8) * 2^e with e in [-1, 4] (step 2^-4, |q| < 32). Keys:
// any nibble times a power-of-two scale in [2^-2, 2^2] (step 2^-3, |k| <= 24). Products are
// multiples of 2^-7 below 2^10, and 128 of them stay below 2^17: every partial sum needs at most
// 24 significant bits, so fp32 sums are exact in any order.
uint8_t exactQueryByte(Rng &rng) {
  if (rng.uniform(0, 7) == 0)
    return 0;
  int e = static_cast<int>(rng.uniform(-1, 4));
  int m = static_cast<int>(rng.uniform(0, 7));
  uint8_t sign = rng.uniform(0, 1) ? 0x80 : 0;
  return sign | static_cast<uint8_t>(((e + 7) << 3) | m);
}

uint8_t exactScaleByte(Rng &rng) {
  int e = static_cast<int>(rng.uniform(-2, 2));
  return static_cast<uint8_t>((e + 7) << 3);
}

void fillRealisticToken(Rng &rng, uint8_t *page, int slot, std::vector<float> &scratch) {
  // Channels with different magnitudes, as real index keys have.
  for (int d = 0; d < spec::kIndexHeadDim; ++d)
    scratch[d] = static_cast<float>(rng.normal() * (1.0 + (d % 7)));
  Status s = nvfp4::quantizeToken(scratch, std::span<uint8_t>(page, spec::kPageBytes), slot);
  (void)s; // finite input by construction
}

void fillExactToken(Rng &rng, uint8_t *page, int slot) {
  uint8_t *data = page + slot * spec::kDataBytesPerToken;
  uint8_t *scales = page + spec::kPageDataBytes + slot * spec::kScalesPerToken;
  for (int i = 0; i < spec::kDataBytesPerToken; ++i)
    data[i] = static_cast<uint8_t>(rng.bits());
  for (int g = 0; g < spec::kScalesPerToken; ++g)
    scales[g] = exactScaleByte(rng);
}

} // namespace

Status validateGenOptions(const GenOptions &o) {
  if (!spec::isSupportedHeadCount(o.numHeads))
    return invalidArgument("--heads", "1, 2 or 4", o.numHeads);
  if (o.numDecodes < 0 || o.numPrefills < 0)
    return invalidArgument("--decodes/--prefills", ">= 0", std::min(o.numDecodes, o.numPrefills));
  if (o.decodeQueryLen < 1)
    return invalidArgument("--decode-query-len", ">= 1", o.decodeQueryLen);
  if (o.initBlocks < 0 || o.localBlocks < 0)
    return invalidArgument("--init/--local", ">= 0", std::min(o.initBlocks, o.localBlocks));
  const int64_t maxTokens = spec::kMaxTokensPerRow;
  // Decode requests may be shorter than their rows (leading rows then see nothing).
  for (auto [name, r, least] : {std::tuple{"--context", o.decodeContext, 0},
                                std::tuple{"--prefill-context", o.prefillContext, 1},
                                std::tuple{"--prefill-len", o.prefillQueryLen, 1}})
    if (r.min < least || r.max < r.min || r.max > maxTokens)
      return invalidArgument(name, fmt::format("{} <= MIN <= MAX <= {}", least, maxTokens),
                             fmt::format("{}:{}", r.min, r.max));
  if (!(o.nanScaleFraction >= 0.0 && o.nanScaleFraction <= 1.0))
    return invalidArgument("--nan-scales", "a fraction in [0, 1]", o.nanScaleFraction);
  if (o.extraPages < 0)
    return invalidArgument("--extra-pages", ">= 0", o.extraPages);
  return Status();
}

StatusOr<Case> generateCase(const GenOptions &o) {
  M3IDX_RETURN_IF_ERROR(validateGenOptions(o));
  // Requests, rows and pages are int32 in the case files (query_start_loc, page ids): the sums
  // below are formed in int64_t and checked before anything is sized by them.
  if (int64_t{o.numDecodes} + o.numPrefills > INT32_MAX - 1)
    return invalidArgument("--decodes/--prefills", fmt::format("at most {} requests in all", INT32_MAX - 1),
                           int64_t{o.numDecodes} + o.numPrefills);
  Rng rng(o.seed);
  const int R = o.numDecodes + o.numPrefills;
  std::vector<int32_t> qLens(R), seqLens(R);
  for (int i = 0; i < R; ++i) {
    if (i < o.numDecodes) {
      qLens[i] = o.decodeQueryLen;
      seqLens[i] = static_cast<int32_t>(rng.uniform(o.decodeContext.min, o.decodeContext.max));
    } else {
      qLens[i] = static_cast<int32_t>(rng.uniform(o.prefillQueryLen.min, o.prefillQueryLen.max));
      int64_t L = rng.uniform(o.prefillContext.min, o.prefillContext.max);
      seqLens[i] = static_cast<int32_t>(std::max<int64_t>(L, qLens[i]));
    }
  }
  int64_t maxBlocks = 0, usedPages = 0, rows = 0;
  for (int i = 0; i < R; ++i) {
    maxBlocks = std::max(maxBlocks, spec::blocksFor(seqLens[i]));
    usedPages += spec::blocksFor(seqLens[i]);
    rows += qLens[i];
  }
  const int64_t numPages = usedPages + o.extraPages;
  if (rows > INT32_MAX)
    return invalidArgument("--decodes/--prefills/--prefill-len", fmt::format("at most {} query rows", INT32_MAX), rows);
  if (numPages > INT32_MAX)
    return invalidArgument("--extra-pages", fmt::format("at most {} pages in all", INT32_MAX), numPages);
  const int64_t M = maxBlocks + 2; // columns past every request's blocks are never read

  Case c;
  c.params = IndexerParams{o.numHeads, o.initBlocks, o.localBlocks, o.numDecodes,
                           o.decodeQueryLen};
  c.seqLens = npy::makeArray(npy::DType::I32, {R});
  c.queryStartLoc = npy::makeArray(npy::DType::I32, {R + 1});
  std::copy(seqLens.begin(), seqLens.end(), c.seqLens.as<int32_t>());
  int32_t *qsl = c.queryStartLoc.as<int32_t>();
  qsl[0] = 0;
  for (int i = 0; i < R; ++i)
    qsl[i + 1] = qsl[i] + qLens[i];
  const int64_t T = qsl[R];

  // Pages in a shuffled order, so logical block ids and page ids differ.
  std::vector<int32_t> pages(numPages);
  std::iota(pages.begin(), pages.end(), 0);
  for (int64_t i = numPages - 1; i > 0; --i)
    std::swap(pages[i], pages[rng.uniform(0, i)]);
  c.blockTable = npy::makeArray(npy::DType::I32, {R, M});
  int32_t *bt = c.blockTable.as<int32_t>();
  int64_t next = 0;
  for (int i = 0; i < R; ++i)
    for (int64_t b = 0; b < M; ++b)
      bt[i * M + b] = b < spec::blocksFor(seqLens[i])
                          ? pages[next++]
                          : static_cast<int32_t>(rng.uniform(0, 1) ? -1 : numPages + 7);

  // Every slot gets bytes, also those past seq_len and in unused pages: a kernel that reads what
  // it must not sees garbage (NaN scales included), not zeros.
  c.kv = npy::makeArray(npy::DType::U8, {numPages, spec::kPageBytes});
  std::vector<float> scratch(spec::kIndexHeadDim);
  for (int64_t p = 0; p < numPages; ++p) {
    uint8_t *page = c.kv.as<uint8_t>() + p * spec::kPageBytes;
    for (int slot = 0; slot < spec::kSparseBlockSize; ++slot) {
      if (o.mode == ValueMode::Exact)
        fillExactToken(rng, page, slot);
      else
        fillRealisticToken(rng, page, slot, scratch);
    }
    if (o.nanScaleFraction > 0)
      for (int s = spec::kPageDataBytes; s < spec::kPageBytes; ++s)
        if (rng.unit() < o.nanScaleFraction)
          page[s] = rng.uniform(0, 1) ? 0x7F : 0xFF;
  }
  for (int64_t p = usedPages; p < numPages; ++p) // the unused pages: pure noise
    for (int s = 0; s < spec::kPageBytes; ++s)
      c.kv.as<uint8_t>()[pages[p] * int64_t{spec::kPageBytes} + s] = static_cast<uint8_t>(rng.bits());

  c.q = npy::makeArray(npy::DType::U8, {T, o.numHeads, spec::kIndexHeadDim});
  uint8_t *q = c.q.as<uint8_t>();
  for (int64_t i = 0; i < T * o.numHeads * spec::kIndexHeadDim; ++i)
    q[i] = o.mode == ValueMode::Exact
               ? exactQueryByte(rng)
               : nvfp4::e4m3RnSatfinite(static_cast<float>(rng.normal() * 2.0));
  return c;
}

} // namespace m3idx
