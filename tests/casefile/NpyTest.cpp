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
