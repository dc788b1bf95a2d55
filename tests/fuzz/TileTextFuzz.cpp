// libFuzzer target: the tile dialect's parser and verifiers (m3idx-opt's input) on any bytes: an
// error or a module that prints, parses and prints again to the same text; never a crash.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tile/TileText.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace m3idx;
  StatusOr<std::string> once = tile::reprintTileText(std::string(reinterpret_cast<const char *>(data), size));
  if (!once.ok())
    return 0;
  StatusOr<std::string> twice = tile::reprintTileText(*once);
  if (!twice.ok() || *twice != *once)
    std::abort();
  return 0;
}
