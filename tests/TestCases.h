// Hand-built cases for tests: pages in order, every key and query zero until a test sets the few
// values it reasons about.
#pragma once

#include <string>
#include <vector>

#include "casefile/CaseFile.h"

namespace m3idx::testing {

// Requests' (q_len, seq_len); the first params.numDecodes are decode requests.
Case buildCase(const IndexerParams &params, const std::vector<int> &qLens,
               const std::vector<int> &seqLens, int extraColumns = 0);

// Sets element `dim` of token `token` of request `request`: nibble and its group's scale byte.
void setKey(Case &c, int request, int token, int dim, uint8_t nibble, uint8_t scale);
// Sets every element of token `token` to the same nibble and scale.
void setKeyAll(Case &c, int request, int token, uint8_t nibble, uint8_t scale);
void setQuery(Case &c, int row, int head, int dim, uint8_t e4m3);

std::string goldenDir(const std::string &name);
std::vector<int32_t> topkRow(const std::vector<int32_t> &topk, int64_t T, int head, int64_t row);

inline constexpr uint8_t kOne = 0x38; // E4M3 1.0

} // namespace m3idx::testing
