#include "m3idx/Tensor.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace m3idx {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::U8: return "uint8";
  case DType::I32: return "int32";
  case DType::F32: return "float32";
  }
  return "unknown";
}

const char *deviceName(DeviceKind k) {
  switch (k) {
  case DeviceKind::Host: return "host";
  case DeviceKind::Cuda: return "cuda";
  case DeviceKind::Hip: return "hip";
  }
  return "unknown";
}

TensorView TensorView::contiguous(void *data, DType dtype, std::initializer_list<int64_t> shape,
                                  Device device) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.ndim = static_cast<int32_t>(shape.size());
  int i = 0;
  for (int64_t d : shape)
    t.shape[i++] = d;
  int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.strides[d] = stride;
    stride *= t.shape[d];
  }
  return t;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d)
    n *= shape[d];
  return n;
}

bool TensorView::isContiguous() const {
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != stride)
      return false;
    stride *= shape[d];
  }
  return true;
}

std::string TensorView::shapeString() const {
  std::vector<int64_t> s(shape, shape + std::max(0, std::min(ndim, kMaxDims)));
  return fmt::format("[{}]", fmt::join(s, ", "));
}

} // namespace m3idx
