// Tensor views at the API boundary: pointer, dtype, shape, strides (in elements) and device.
// m3idx never owns or frees what a view points to; every entry point validates views it is given.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

namespace m3idx {

enum class DType : int32_t { U8 = 0, I32 = 1, F32 = 2 };
enum class DeviceKind : int32_t { Host = 0, Cuda = 1, Hip = 2 };

struct Device {
  DeviceKind kind = DeviceKind::Host;
  int32_t index = 0;
};

const char *dtypeName(DType t);       // "uint8", "int32", "float32"
const char *deviceName(DeviceKind k); // "host", "cuda", "hip"

inline constexpr int kMaxDims = 4;

struct TensorView {
  void *data = nullptr;
  DType dtype = DType::U8;
  int32_t ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
  Device device;

  static TensorView contiguous(void *data, DType dtype, std::initializer_list<int64_t> shape,
                               Device device = {});
  int64_t numel() const;
  bool isContiguous() const;
  std::string shapeString() const; // "[2, 3]"
};

} // namespace m3idx
