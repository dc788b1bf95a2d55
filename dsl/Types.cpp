#include "dsl/Types.h"

#include <fmt/format.h>

namespace m3idx::dsl {

const char *elemName(Elem e) {
  switch (e) {
  case Elem::I1: return "i1";
  case Elem::I8: return "i8";
  case Elem::I32: return "i32";
  case Elem::I64: return "i64";
  case Elem::F32: return "f32";
  case Elem::F8E4M3FN: return "f8E4M3FN";
  case Elem::F4E2M1FN: return "f4E2M1FN";
  }
  return "?";
}

int elemBits(Elem e) {
  switch (e) {
  case Elem::I1: return 1;
  case Elem::I8: return 8;
  case Elem::I32: return 32;
  case Elem::I64: return 64;
  case Elem::F32: return 32;
  case Elem::F8E4M3FN: return 8;
  case Elem::F4E2M1FN: return 4;
  }
  return 0;
}

bool isFloat(Elem e) { return e == Elem::F32 || e == Elem::F8E4M3FN || e == Elem::F4E2M1FN; }

std::string Type::str() const {
  return isTile() ? fmt::format("tile<{} x {}>", lanes, elemName(elem)) : elemName(elem);
}

} // namespace m3idx::dsl
