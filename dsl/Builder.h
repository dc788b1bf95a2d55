// The C++ front end of the tile DSL: a typed builder in which kernels are written. Every op is
// type-checked as it is built; the first error is kept and returned by finish(), so an ill-typed
// kernel is a clear error value, never a crash or a malformed lowering.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/Status.h"
#include "dsl/Ir.h"

namespace m3idx::dsl {

class KernelBuilder;

// A handle to an SSA value under construction; operators build ops on its builder.
class Value {
public:
  Value() = default;
  Value(KernelBuilder *b, ValueId id) : b_(b), id_(id) {}
  Type type() const;
  ValueId id() const { return id_; }
  KernelBuilder *builder() const { return b_; }

private:
  KernelBuilder *b_ = nullptr;
  ValueId id_;
};

struct Buffer {
  int index = -1;
  Elem elem = Elem::I8;
  Access access = Access::Read;
};

using Values = std::vector<Value>;

class KernelBuilder {
public:
  explicit KernelBuilder(std::string name, int warps = 1); // warps: see Kernel::warps

  // Arguments, in signature order: buffers first, then scalars.
  Buffer buffer(const std::string &name, Elem elem, Access access);
  Value scalarArg(const std::string &name, Elem elem);

  Value programId(); // i64: which program of the grid this is
  Value constInt(int64_t v, Elem e = Elem::I64);
  Value constF32(double v);
  Value constLike(Value like, double v); // scalar or splat tile of like's type
  Value iota(int lanes);                 // tile<lanes x i64> 0, 1, ...

  Value binary(OpKind k, Value a, Value b);
  Value cmp(OpKind k, Value a, Value b);
  Value select(Value cond, Value a, Value b);
  Value maxNumF(Value a, Value b) { return binary(OpKind::MaxNumF, a, b); } // fmaxf: drops NaN
  Value minS(Value a, Value b) { return binary(OpKind::MinS, a, b); }
  Value maxS(Value a, Value b) { return binary(OpKind::MaxS, a, b); }

  Value convert(OpKind k, Value v, Elem to); // ExtS ExtU Trunc SIToFP ExtF TruncF Bitcast
  Value clampF(Value v, double bound);       // to [-bound, bound], NaN kept

  Value splat(Value s, int lanes);
  Value extract(Value t, int lane);
  // Lane `lane` (an i64 scalar, in [0, lanes): out of range is undefined) of tile t.
  Value extractAt(Value t, Value lane);
  Value shuffle(Value a, Value b, std::vector<int32_t> mask); // lanes of a then b
  Value reduceAdd(Value t);
  Value reduceMax(Value t);
  // tile<G*S x f32> -> tile<G x f32>: lane g is the fmaxf (NaN dropped) of lanes [g*S, g*S + S).
  Value reduceMaxGroups(Value t, int groups);
  // tile<L x f32> -> tile<L/2 x f32>: the fmaxf of each pair of lanes i, i + d with bit d of i
  // clear (d a power of two, 2d dividing L), at lane (i / 2d) * d + i % d. A max over all lanes
  // may fold pairs first; which pairs is the kernel's choice (a layout's registers may hold them).
  Value foldMax(Value t, int d);

  Value load(Buffer buf, Value offset);
  Value loadTile(Buffer buf, Value offset, int lanes);
  // The same, promising that the element at `offset` sits at an address aligned to alignBytes (a
  // power of two, at most 16) when the buffer's base is 16-byte aligned, as GPU backends require:
  // GPU targets then issue wide loads.
  Value loadTile(Buffer buf, Value offset, int lanes, int alignBytes);
  // Lanes at or past `limit` (an i64 scalar) read 0 and touch no memory (Triton's masked load).
  Value loadTile(Buffer buf, Value offset, int lanes, Value limit);
  void store(Buffer buf, Value offset, Value v);
  void storeTile(Buffer buf, Value offset, Value v);
  // buf[offsets[i]] = v[i] for the lanes where mask[i] (offsets tile<N x i64>, mask tile<N x i1>);
  // masked-off lanes touch no memory, so their offsets may be anything.
  void storeScatter(Buffer buf, Value offsets, Value v, Value mask);

  // e4m3_rn_satfinite(E2M1(nibble) * E4M3(scale)) for every element: packed is tile<N/2 x i8>
  // (element 2i in the low nibble of byte i), scales tile<N/16 x i8>; result tile<N x f8E4M3FN>.
  Value decodeNvfp4(Value packed, Value scales);
  // sum of a[i] * b[i] over f32 tiles in fp32; the order of the sum is the target's.
  Value dot(Value a, Value b);
  // Every row of a against every row of b, rows being k consecutive lanes (Triton's tl.dot with b
  // transposed): a is tile<M*k>, b tile<N*k>, both f32 or both f8E4M3FN; the result is
  // tile<N*M x f32> with lane n*M + m = sum_i a[m*k + i] * b[n*k + i], in fp32 (exact products,
  // the target's order of the sum). Targets with matrix units run it on them.
  Value dotTiles(Value a, Value b, int k);
  // SPEC §5 top-k key: (ordered bits of score, NaN -> -inf, -0 -> +0) << 32 | block; scalars, or
  // lane by lane for a tile of scores and a tile of blocks.
  Value packScoreKey(Value score, Value block);

  // `unroll` > 1 is a hint: targets that gain from it may run that many trips per iteration (the
  // lowering decides per target; results are the same either way).
  Values forLoop(Value lo, Value hi, Value step, const Values &inits,
                 const std::function<Values(Value iv, const Values &iters)> &body, int unroll = 1);
  Values ifElse(Value cond, const std::function<Values()> &thenFn,
                const std::function<Values()> &elseFn);
  void ifThen(Value cond, const std::function<void()> &thenFn);

  StatusOr<Kernel> finish();

  Type typeOf(ValueId v) const { return k_.valueTypes[v.id]; }

private:
  struct Cursor {
    int32_t op; // -1: the kernel body
    int region;
  };
  Region &current();
  ValueId newValue(Type t);
  Values emit(OpKind kind, const Values &operands, const std::vector<Type> &results,
              int64_t intAttr = 0, double floatAttr = 0, std::vector<int32_t> lanes = {});
  Value emit1(OpKind kind, const Values &operands, Type result, int64_t intAttr = 0,
              double floatAttr = 0, std::vector<int32_t> lanes = {});
  bool check(bool ok, const std::string &what);
  bool live(std::initializer_list<Value> vs);
  Value poison(Type t);
  Values runRegion(int32_t op, int region, const std::function<Values()> &fn);

  Kernel k_;
  std::vector<Cursor> cursor_;
  std::optional<std::string> error_;
  bool argsClosed_ = false;
};

// Operators for kernel readability; integer literals take the other operand's type.
Value operator+(Value a, Value b);
Value operator-(Value a, Value b);
Value operator*(Value a, Value b);
Value operator/(Value a, Value b);
Value operator%(Value a, Value b);
Value operator&(Value a, Value b);
Value operator|(Value a, Value b);
Value operator<(Value a, Value b);
Value operator<=(Value a, Value b);
Value operator>(Value a, Value b);
Value operator>=(Value a, Value b);
Value operator==(Value a, Value b);
Value operator+(Value a, int64_t b);
Value operator-(Value a, int64_t b);
Value operator*(Value a, int64_t b);
Value operator/(Value a, int64_t b);
Value operator%(Value a, int64_t b);
Value operator<(Value a, int64_t b);
Value operator>=(Value a, int64_t b);

} // namespace m3idx::dsl
