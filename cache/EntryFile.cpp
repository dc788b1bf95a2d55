#include "cache/EntryFile.h"

#include <cstring>

#include "cache/CacheKey.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/Endian.h"

namespace m3idx::cache {

namespace {

constexpr char kMagic[8] = {'M', '3', 'I', 'D', 'X', 'K', 'C', '\n'};
constexpr size_t kChecksumBytes = 32;

void put32(std::string &out, uint32_t v) {
  char b[4];
  llvm::support::endian::write32le(b, v);
  out.append(b, 4);
}

void putField(std::string &out, std::string_view s) {
  put32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

std::array<uint8_t, kChecksumBytes> checksum(std::string_view bytes) {
  llvm::BLAKE3 h;
  h.update(llvm::StringRef(bytes.data(), bytes.size()));
  return h.final();
}

} // namespace

std::string encodeEntry(const Entry &e) {
  std::string out(kMagic, sizeof kMagic);
  put32(out, kFormatVersion);
  for (const std::string *s : {&e.producer, &e.target, &e.kernel, &e.config, &e.key, &e.symbol,
                               &e.metadata})
    putField(out, *s);
  putField(out, std::string_view(reinterpret_cast<const char *>(e.binary.data()), e.binary.size()));
  auto sum = checksum(out);
  out.append(reinterpret_cast<const char *>(sum.data()), sum.size());
  return out;
}

StatusOr<Entry> decodeEntry(std::string_view bytes, const std::string &where) {
  auto bad = [&](const std::string &what) {
    return invalidArgument(where, "a valid m3idx cache entry", what);
  };
  if (bytes.size() < sizeof kMagic + 4 + kChecksumBytes)
    return bad(fmt::format("{} bytes (truncated)", bytes.size()));
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return bad("a wrong magic number");
  const uint32_t version = llvm::support::endian::read32le(bytes.data() + sizeof kMagic);
  if (version != kFormatVersion)
    return bad(fmt::format("format version {} (this build reads {})", version, kFormatVersion));
  const std::string_view body = bytes.substr(0, bytes.size() - kChecksumBytes);
  auto sum = checksum(body);
  if (std::memcmp(sum.data(), bytes.data() + body.size(), kChecksumBytes) != 0)
    return bad("a checksum mismatch (corrupted)");
  size_t at = sizeof kMagic + 4;
  auto next = [&](std::string &dst) -> bool {
    if (at + 4 > body.size())
      return false;
    const uint32_t len = llvm::support::endian::read32le(body.data() + at);
    at += 4;
    if (len > body.size() - at)
      return false;
    dst.assign(body.data() + at, len);
    at += len;
    return true;
  };
  Entry e;
  std::string binary;
  for (std::string *s : {&e.producer, &e.target, &e.kernel, &e.config, &e.key, &e.symbol,
                         &e.metadata, &binary})
    if (!next(*s))
      return bad("a field running past the end");
  if (at != body.size())
    return bad("trailing bytes");
  e.binary.assign(binary.begin(), binary.end());
  return e;
}

} // namespace m3idx::cache
