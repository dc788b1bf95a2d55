// Element and value types of the m3idx tile DSL. A value is a scalar or a 1-D tile of `lanes`
// elements; small-float element types use MLIR's canonical names (f4E2M1FN, f8E4M3FN).
#pragma once

#include <cstdint>
#include <string>

namespace m3idx::dsl {

enum class Elem : uint8_t { I1, I8, I32, I64, F32, F8E4M3FN, F4E2M1FN };

const char *elemName(Elem e); // "i1", ..., "f8E4M3FN"
int elemBits(Elem e);
bool isFloat(Elem e);
inline bool isInt(Elem e) { return !isFloat(e); }

struct Type {
  Elem elem = Elem::I64;
  int lanes = 0; // 0: scalar; N >= 1: a tile of N lanes

  bool isTile() const { return lanes > 0; }
  bool operator==(const Type &o) const { return elem == o.elem && lanes == o.lanes; }
  bool operator!=(const Type &o) const { return !(*this == o); }
  Type withElem(Elem e) const { return Type{e, lanes}; }
  std::string str() const; // "i64", "tile<128 x f32>"
};

inline Type scalar(Elem e) { return Type{e, 0}; }
inline Type tile(Elem e, int lanes) { return Type{e, lanes}; }

} // namespace m3idx::dsl
