#include "casefile/Npy.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "core/AtomicFile.h"

namespace m3idx::npy {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

StatusOr<DType> parseDescr(const std::string &path, const std::string &descr) {
  // '|' (not applicable) and '<' (little) are fine; '=' is native, little on every target we run.
  if (descr.size() == 3 && (descr[0] == '|' || descr[0] == '<' || descr[0] == '=')) {
    std::string t = descr.substr(1);
    if (t == "u1")
      return DType::U8;
    if (t == "i4")
      return DType::I32;
    if (t == "f4")
      return DType::F32;
  }
  if (descr == "u1")
    return DType::U8;
  return invalidArgument(path, "dtype |u1, <i4 or <f4 (little-endian)", "'" + descr + "'");
}

} // namespace

const char *dtypeName(DType t) {
  switch (t) {
  case DType::U8:
    return "|u1";
  case DType::I32:
    return "<i4";
  case DType::F32:
    return "<f4";
  }
  return "?";
}

size_t dtypeSize(DType t) { return t == DType::U8 ? 1 : 4; }

bool shapeFits(const std::vector<int64_t> &shape, DType dtype) {
  // Every partial product, not only the whole: a 0 after dimensions whose product overflows makes
  // the whole 0 while numel()'s running product has already overflowed.
  int64_t elements = 1;
  size_t bytes = dtypeSize(dtype);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(elements, d, &elements) ||
        __builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes))
      return false;
  return true;
}

int64_t Array::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d; // cannot overflow: decode() and makeArray() admit only shapes that shapeFits()
  return n;
}

Array makeArray(DType dtype, std::vector<int64_t> shape) {
  if (!shapeFits(shape, dtype))
    throw std::length_error("npy::makeArray: shape " + shapeString(shape) + " does not fit in memory");
  Array a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.bytes.assign(static_cast<size_t>(a.numel()) * dtypeSize(dtype), 0);
  return a;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

StatusOr<Array> read(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return invalidArgument(path, "a readable .npy file", "a missing or unreadable file");
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return decode(content, path);
}

StatusOr<Array> decode(std::string_view content, const std::string &path) {
  auto bad = [&](const std::string &what) {
    return invalidArgument(path, "a NumPy .npy file", what);
  };
  if (content.size() < kMagicLen + 4 || std::memcmp(content.data(), kMagic, kMagicLen) != 0)
    return bad("no .npy magic (\\x93NUMPY)");
  const int major = static_cast<uint8_t>(content[6]);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = static_cast<uint8_t>(content[8]) | (static_cast<uint8_t>(content[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (content.size() < 12)
      return bad("a truncated header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= static_cast<size_t>(static_cast<uint8_t>(content[8 + i])) << (8 * i);
    headerStart = 12;
  } else {
    return bad(fmt::format("format version {}.x", major));
  }
  if (content.size() < headerStart + headerLen)
    return bad("a truncated header");
  const std::string header(content.substr(headerStart, headerLen));

  std::smatch m;
  static const std::regex descrRe(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex fortranRe(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shapeRe(R"('shape'\s*:\s*\(([^)]*)\))");
  if (!std::regex_search(header, m, descrRe))
    return bad("a header without 'descr'");
  StatusOr<DType> dtype = parseDescr(path, m[1].str());
  if (!dtype.ok())
    return dtype.status();
  if (!std::regex_search(header, m, fortranRe))
    return bad("a header without 'fortran_order'");
  if (m[1].str() == "True")
    return invalidArgument(path, "C order (fortran_order False)", "fortran_order True");
  if (!std::regex_search(header, m, shapeRe))
    return bad("a header without 'shape'");

  Array a;
  a.dtype = *dtype;
  std::stringstream dims(m[1].str());
  std::string item;
  while (std::getline(dims, item, ',')) {
    size_t first = item.find_first_not_of(" \t"), last = item.find_last_not_of(" \tL");
    if (first == std::string::npos)
      continue;
    std::string digits = item.substr(first, last - first + 1);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
        digits.size() > 12)
      return bad(fmt::format("a bad shape entry '{}'", item));
    a.shape.push_back(std::stoll(digits));
  }
  const size_t available = content.size() - headerStart - headerLen;
  if (!shapeFits(a.shape, a.dtype))
    return bad(fmt::format("a shape {} whose element count or bytes overflow 64 bits", shapeString(a.shape)));
  const size_t dataBytes = static_cast<size_t>(a.numel()) * dtypeSize(a.dtype);
  if (available != dataBytes)
    return invalidArgument(path, fmt::format("{} data bytes for shape {} of {}", dataBytes,
                                             shapeString(a.shape), dtypeName(a.dtype)),
                           fmt::format("{} bytes{}", available,
                                       available < dataBytes ? " (truncated)" : ""));
  a.bytes.assign(content.begin() + headerStart + headerLen, content.end());
  return a;
}

std::string encode(const Array &array) {
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}{}), }}",
                                 dtypeName(array.dtype), fmt::join(array.shape, ", "),
                                 array.shape.size() == 1 ? "," : "");
  // Pad so magic + len + dict + '\n' is a multiple of 64 (the format asks for 16; NumPy uses 64).
  size_t total = kMagicLen + 2 + 2 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicLen);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(dict.size() & 0xFF));
  out.push_back(static_cast<char>(dict.size() >> 8));
  out += dict;
  out.append(reinterpret_cast<const char *>(array.bytes.data()), array.bytes.size());
  return out;
}

Status write(const std::string &path, const Array &array) {
  return writeFileAtomically(path, encode(array));
}

} // namespace m3idx::npy
