#include "cache/CacheKey.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/Endian.h"

namespace m3idx::cache {

namespace {

// tag, then the field's length as 8 little-endian bytes, then its bytes: no two different field
// lists encode to the same byte string.
void field(llvm::BLAKE3 &h, llvm::StringRef tag, llvm::StringRef value) {
  h.update(tag);
  uint8_t len[8];
  llvm::support::endian::write64le(len, value.size());
  h.update(llvm::ArrayRef<uint8_t>(len, 8));
  h.update(value);
}

} // namespace

std::string cacheKey(const KeyInputs &in) {
  llvm::BLAKE3 h;
  field(h, "format", std::to_string(kFormatVersion));
  field(h, "toolchain", in.toolchain);
  field(h, "kernel", in.kernel);
  field(h, "dsl", in.dsl);
  field(h, "config", in.config);
  field(h, "target", in.target);
  field(h, "options", in.options);
  field(h, "environment", in.environment);
  auto digest = h.final();
  return llvm::toHex(llvm::ArrayRef<uint8_t>(digest.data(), digest.size()), /*LowerCase=*/true);
}

} // namespace m3idx::cache
