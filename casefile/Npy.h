// NumPy .npy files (format 1.0, 2.0 and 3.0 headers; little-endian, C order) for the three dtypes
// the case format uses: u1, i4, f4. Reading a bad file is an error that names the file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/Status.h"

namespace m3idx::npy {

enum class DType { U8, I32, F32 };
const char *dtypeName(DType t); // numpy descr, e.g. "|u1"
size_t dtypeSize(DType t);

struct Array {
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes; // numel * itemsize, C order

  int64_t numel() const; // never overflows: every Array's shape satisfies shapeFits()
  template <typename T> const T *as() const { return reinterpret_cast<const T *>(bytes.data()); }
  template <typename T> T *as() { return reinterpret_cast<T *>(bytes.data()); }
};

// Whether every partial product of `shape` (zero dimensions included) fits in int64_t elements
// and in size_t bytes of `dtype`; decode() refuses other shapes, so numel() cannot overflow.
bool shapeFits(const std::vector<int64_t> &shape, DType dtype);
// Throws std::length_error for a shape that does not fit (a caller's bug, never file input).
Array makeArray(DType dtype, std::vector<int64_t> shape);
std::string shapeString(const std::vector<int64_t> &shape); // "[2, 3]"

StatusOr<Array> read(const std::string &path);
// Parses a file image; errors name `where` (the file it came from).
StatusOr<Array> decode(std::string_view content, const std::string &where);
// Serialises a v1.0 file image.
std::string encode(const Array &array);
// Writes atomically: a temporary file in the same directory, then rename.
Status write(const std::string &path, const Array &array);

} // namespace m3idx::npy
