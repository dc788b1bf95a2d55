// One cache entry as one file: magic, format version, header fields (producer, target, kernel,
// config, key, entry symbol), JSON metadata, the binary, then a BLAKE3 checksum of all of it.
// Decoding checks every part; any defect is an error that names it (the caller treats it as a miss).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/Status.h"

namespace m3idx::cache {

struct Entry {
  std::string producer; // m3idx version and build id
  std::string target;   // "host", later "gfx950", "sm_90"
  std::string kernel;
  std::string config;
  std::string key;
  std::string symbol;   // entry point in the binary
  std::string metadata; // JSON: compile times, sizes, target description
  std::vector<uint8_t> binary;
};

std::string encodeEntry(const Entry &e);
StatusOr<Entry> decodeEntry(std::string_view bytes, const std::string &where);

} // namespace m3idx::cache
