#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "casefile/Npy.h"

using namespace m3idx;
namespace fs = std::filesystem;

namespace {

std::string tempPath(const std::string &name) {
  fs::path dir = fs::temp_directory_path() / ("m3idx_npy_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

void writeRaw(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string v2Header(const std::string &dict, const std::string &data) {
  std::string d = dict;
  while ((12 + d.size() + 1) % 64)
    d.push_back(' ');
  d.push_back('\n');
  std::string out("\x93NUMPY\x02\x00", 8);
  uint32_t n = static_cast<uint32_t>(d.size());
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  return out + d + data;
}

} // namespace

TEST(Npy, RoundTripsEachDtype) {
  npy::Array a = npy::makeArray(npy::DType::I32, {2, 3});
  for (int i = 0; i < 6; ++i)
    a.as<int32_t>()[i] = i * 1000 - 7;
  std::string p = tempPath("a.npy");
  ASSERT_TRUE(npy::write(p, a).ok());
  StatusOr<npy::Array> b = npy::read(p);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->shape, a.shape);
  EXPECT_EQ(b->bytes, a.bytes);
  EXPECT_EQ(b->dtype, npy::DType::I32);

  npy::Array one = npy::makeArray(npy::DType::U8, {5});
  ASSERT_TRUE(npy::write(p, one).ok());
  EXPECT_EQ(npy::read(p)->shape, std::vector<int64_t>{5});
  npy::Array f = npy::makeArray(npy::DType::F32, {0, 4});
  ASSERT_TRUE(npy::write(p, f).ok());
  EXPECT_EQ(npy::read(p)->shape, (std::vector<int64_t>{0, 4}));
}

TEST(Npy, HeaderIsNumpyCompatible) {
  std::string img = npy::encode(npy::makeArray(npy::DType::U8, {3, 2}));
  EXPECT_EQ(img.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ((img.size() - 6) % 64, 0u); // header padded to 64; 6 data bytes follow
  EXPECT_NE(img.find("'shape': (3, 2)"), std::string::npos);
}

TEST(Npy, ReadsVersion2Headers) {
  std::string p = tempPath("v2.npy");
  writeRaw(p, v2Header("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
                       std::string("\x01\x00\x00\x00\x02\x00\x00\x00", 8)));
  StatusOr<npy::Array> a = npy::read(p);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->as<int32_t>()[1], 2);
}

TEST(Npy, RejectsTruncatedData) {
  std::string p = tempPath("t.npy");
  std::string img = npy::encode(npy::makeArray(npy::DType::I32, {4}));
  writeRaw(p, img.substr(0, img.size() - 3));
  StatusOr<npy::Array> a = npy::read(p);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find(p), std::string::npos);
  EXPECT_NE(a.status().message().find("truncated"), std::string::npos) << a.status().message();
}

TEST(Npy, RejectsTruncatedHeader) {
  std::string p = tempPath("th.npy");
  writeRaw(p, npy::encode(npy::makeArray(npy::DType::I32, {4})).substr(0, 30));
  ASSERT_FALSE(npy::read(p).ok());
}

TEST(Npy, RejectsNonNpy) {
  std::string p = tempPath("x.npy");
  writeRaw(p, "just some text, not numpy");
  StatusOr<npy::Array> a = npy::read(p);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("magic"), std::string::npos) << a.status().message();
}

TEST(Npy, RejectsMissingFile) {
  StatusOr<npy::Array> a = npy::read(tempPath("missing.npy"));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("missing.npy"), std::string::npos);
}

TEST(Npy, RejectsFortranOrderBigEndianAndOtherDtypes) {
  std::string p = tempPath("f.npy");
  for (std::string dict : {"{'descr': '<i4', 'fortran_order': True, 'shape': (1,), }",
                           "{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }",
                           "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }"}) {
    writeRaw(p, v2Header(dict, std::string(8, '\0')));
    StatusOr<npy::Array> a = npy::read(p);
    EXPECT_FALSE(a.ok()) << dict;
  }
}

TEST(Npy, RejectsExtraTrailingBytes) {
  std::string p = tempPath("e.npy");
  writeRaw(p, npy::encode(npy::makeArray(npy::DType::U8, {4})) + "zz");
  ASSERT_FALSE(npy::read(p).ok());
}

namespace {

std::vector<uint8_t> fromHex(const std::string &hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

StatusOr<npy::Array> decodeV2(const std::string &dict) {
  return npy::decode(v2Header(dict, ""), "big.npy");
}

} // namespace

// The fuzzer's finding (issue 41): dimensions whose product lies in [2^63, 2^64), then a 0. The
// size_t byte count did not wrap and the 0 made it match the 0 data bytes, while numel()'s int64_t
// product overflowed before it reached the 0 (UBSan: signed integer overflow in Array::numel).
TEST(Npy, RefusesShapesWhosePartialProductOverflowsBeforeAZero) {
  StatusOr<npy::Array> a = decodeV2("{'descr': '|u1', 'fortran_order': False, 'shape': (3037000500, 3037000500, 0), }");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("[3037000500, 3037000500, 0]"), std::string::npos) << a.status().message();
  EXPECT_NE(a.status().message().find("overflow"), std::string::npos) << a.status().message();
  // The same dimensions in size_t bytes of an i4 array overflow too; and a product that fits is fine.
  EXPECT_FALSE(decodeV2("{'descr': '<i4', 'fortran_order': False, 'shape': (2147483648, 2147483648, 0), }").ok());
  StatusOr<npy::Array> fits = decodeV2("{'descr': '<i4', 'fortran_order': False, 'shape': (1000000, 1000000, 0), }");
  ASSERT_TRUE(fits.ok()) << fits.status().message();
  EXPECT_EQ(fits->numel(), 0);
}

TEST(Npy, RefusesTheFuzzersInput) {
  const std::vector<uint8_t> bytes = fromHex(
      "934e554d505901090101934e554d5059010076007b275a65736372273a20277c75316f72646572273a276465736372"
      "273a20277c7531272c2027666f727472616e5f6f72646572273a2046616c73652c20277368617065273a2028382c33"
      "2c382c352c382c312c342c38352c2c332c382c35342c342c38352c2c382c312c2c382c382c312c352c352c312c342c"
      "38352c2c332c302c373633373835323631292c20202020200a81030000276465736372273a20273c69342750ffffff"
      "7065273a20283030373633373835323631292c20202020200a81030000276465736372273a20273c69342750ffffff"
      "fffffb0000666f333029202020277a2020202020202000b93e20202059e5202d");
  ASSERT_EQ(bytes.size(), 267u);
  StatusOr<npy::Array> a = npy::decode(std::string_view(reinterpret_cast<const char *>(bytes.data()), bytes.size()), "fuzz.npy");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("overflow"), std::string::npos) << a.status().message();
}

TEST(Npy, ShapeFitsChecksEveryPartialProduct) {
  EXPECT_TRUE(npy::shapeFits({}, npy::DType::I32));
  EXPECT_TRUE(npy::shapeFits({0, int64_t{1} << 62}, npy::DType::U8));
  EXPECT_FALSE(npy::shapeFits({int64_t{1} << 62, 0}, npy::DType::I32)); // 2^64 bytes before the 0
  EXPECT_FALSE(npy::shapeFits({-1}, npy::DType::U8));
  EXPECT_THROW(npy::makeArray(npy::DType::U8, {int64_t{1} << 40, int64_t{1} << 40}), std::length_error);
}
