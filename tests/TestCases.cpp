#include "tests/TestCases.h"

#include <algorithm>
#include <cstdlib>

#include "core/Spec.h"

namespace m3idx::testing {

Case buildCase(const IndexerParams &params, const std::vector<int> &qLens,
               const std::vector<int> &seqLens, int extraColumns) {
  Case c;
  c.params = params;
  const int64_t R = static_cast<int64_t>(qLens.size());
  int64_t T = 0, pages = 0, maxBlocks = 0;
  for (int64_t i = 0; i < R; ++i) {
    T += qLens[i];
    pages += spec::blocksFor(seqLens[i]);
    maxBlocks = std::max(maxBlocks, spec::blocksFor(seqLens[i]));
  }
  c.q = npy::makeArray(npy::DType::U8, {T, params.numHeads, spec::kIndexHeadDim});
  c.kv = npy::makeArray(npy::DType::U8, {pages, spec::kPageBytes});
  c.blockTable = npy::makeArray(npy::DType::I32, {R, maxBlocks + extraColumns});
  c.seqLens = npy::makeArray(npy::DType::I32, {R});
  c.queryStartLoc = npy::makeArray(npy::DType::I32, {R + 1});
  int32_t *qsl = c.queryStartLoc.as<int32_t>();
  int32_t next = 0;
  for (int64_t i = 0; i < R; ++i) {
    qsl[i + 1] = qsl[i] + qLens[i];
    c.seqLens.as<int32_t>()[i] = seqLens[i];
    for (int64_t b = 0; b < maxBlocks + extraColumns; ++b)
      c.blockTable.as<int32_t>()[i * (maxBlocks + extraColumns) + b] =
          b < spec::blocksFor(seqLens[i]) ? next++ : -1;
  }
  // Scale 1.0 everywhere, nibble 0: every key is +0.
  for (int64_t p = 0; p < pages; ++p)
    std::fill_n(c.kv.as<uint8_t>() + p * spec::kPageBytes + spec::kPageDataBytes,
                spec::kPageBytes - spec::kPageDataBytes, kOne);
  return c;
}

void setKey(Case &c, int request, int token, int dim, uint8_t nibble, uint8_t scale) {
  const BatchView v = c.view();
  const int32_t page = v.pageOf(request, token / spec::kSparseBlockSize);
  const int slot = token % spec::kSparseBlockSize;
  uint8_t *base = c.kv.as<uint8_t>() + int64_t{page} * spec::kPageBytes;
  uint8_t &byte = base[slot * spec::kDataBytesPerToken + dim / 2];
  byte = (dim & 1) ? static_cast<uint8_t>((byte & 0x0F) | (nibble << 4))
                   : static_cast<uint8_t>((byte & 0xF0) | nibble);
  base[spec::kPageDataBytes + slot * spec::kScalesPerToken + dim / spec::kScaleGroup] = scale;
}

void setKeyAll(Case &c, int request, int token, uint8_t nibble, uint8_t scale) {
  for (int d = 0; d < spec::kIndexHeadDim; ++d)
    setKey(c, request, token, d, nibble, scale);
}

void setQuery(Case &c, int row, int head, int dim, uint8_t e4m3) {
  c.q.as<uint8_t>()[(int64_t{row} * c.params.numHeads + head) * spec::kIndexHeadDim + dim] = e4m3;
}

// M3IDX_TEST_DATA in the environment moves the data (the test bundle of scripts/package --tests
// runs where the source tree is not); read directly: it is a test's, not one of m3idx's variables.
std::string goldenDir(const std::string &name) {
  const char *moved = std::getenv("M3IDX_TEST_DATA");
  return std::string(moved ? moved : M3IDX_TEST_DATA) + "/golden/" + name;
}

std::vector<int32_t> topkRow(const std::vector<int32_t> &topk, int64_t T, int head, int64_t row) {
  auto first = topk.begin() + (head * T + row) * spec::kTopkBlocks;
  return std::vector<int32_t>(first, first + spec::kTopkBlocks);
}

} // namespace m3idx::testing
