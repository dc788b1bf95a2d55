// The tile dialect as text, for tools and tests that do not speak MLIR (no MLIR header here).
#pragma once

#include <string>

#include "core/Status.h"
#include "dsl/Ir.h"

namespace m3idx::tile {

// The kernel as a tile-dialect module, verified (m3idx inspect --emit tile).
StatusOr<std::string> tileText(const dsl::Kernel &k);
// Tile-dialect text parsed and verified, printed again; an error (with MLIR's diagnostics) where
// it does not parse or verify. Any bytes are valid input (tests/fuzz/TileParserFuzz.cpp).
StatusOr<std::string> reprintTileText(const std::string &text);

} // namespace m3idx::tile
