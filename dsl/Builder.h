// The C++ front end of the tile DSL: a typed builder in which kernels are written. Every op is
// type-checked as it is built; the first error is kept and returned by finish(), so an ill-typed
// kernel is a clear error value, never a crash or a malformed lowering.
#pragma once

#include <functional>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "core/Status.h"
#include "dsl/Ir.h"

namespace m3idx::dsl {

class KernelBuilder;

// Every builder call takes where it is called from (a defaulted last argument), so each op knows
// its kernel line (Op::loc); ops a call builds on the way (a splat for a broadcast) share it.
using SourceAt = std::source_location;

// A handle to an SSA value under construction; operators build ops on its builder.
class Value {
public:
  Value() = default;
  Value(KernelBuilder *b, ValueId id) : b_(b), id_(id) {}
  Type type() const;
  ValueId id() const { return id_; }
  KernelBuilder *builder() const { return b_; }
  // The conversion to `e` that keeps the value: a wider integer sign-extends, a narrower one
  // truncates, an integer to f32 converts signed, a small float widens to f32 exactly, f32 rounds
  // to f8E4M3FN (satfinite); the same type is the value itself.
  Value to(Elem e, SourceAt at = SourceAt::current()) const;
  Value zext(Elem e, SourceAt at = SourceAt::current()) const;    // zero-extends an integer
  Value bitcast(Elem e, SourceAt at = SourceAt::current()) const; // same bits, another type

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

// A divisor argument (KernelBuilder::divisorArg): its value and its word (dsl/Divisor.h).
struct Divisor {
  Value value, word;
};

class KernelBuilder {
public:
  explicit KernelBuilder(std::string name, int warps = 1); // warps: see Kernel::warps

  // Arguments, in signature order: buffers first, then scalars.
  Buffer buffer(const std::string &name, Elem elem, Access access, SourceAt at = SourceAt::current());
  Value scalarArg(const std::string &name, Elem elem, SourceAt at = SourceAt::current());
  // An i64 scalar argument `name` that the kernel divides by (divide, remainder), in [1, 2^31),
  // and after it the argument divisorWordName(name) holding its word, which launches fill from
  // the value (kernels::bindLaunch): divisions by it are a multiply and shifts.
  Divisor divisorArg(const std::string &name, SourceAt at = SourceAt::current());

  Value programId(SourceAt at = SourceAt::current()); // i64: which program of the grid this is
  Value constInt(int64_t v, Elem e = Elem::I64, SourceAt at = SourceAt::current());
  Value constF32(double v, SourceAt at = SourceAt::current());
  Value constLike(Value like, double v, SourceAt at = SourceAt::current()); // scalar or splat tile of like's type
  Value iota(int lanes, SourceAt at = SourceAt::current());                 // tile<lanes x i64> 0, 1, ...

  // Elementwise ops broadcast: a scalar operand next to a tile (of its element type) is splat to
  // the tile's lanes, as is a scalar branch of a select with a tile condition.
  Value binary(OpKind k, Value a, Value b, SourceAt at = SourceAt::current());
  Value cmp(OpKind k, Value a, Value b, SourceAt at = SourceAt::current());
  Value select(Value cond, Value a, Value b, SourceAt at = SourceAt::current());
  Value maxNumF(Value a, Value b, SourceAt at = SourceAt::current()) { return binary(OpKind::MaxNumF, a, b, at); } // fmaxf: drops NaN
  Value minS(Value a, Value b, SourceAt at = SourceAt::current()) { return binary(OpKind::MinS, a, b, at); }
  Value maxS(Value a, Value b, SourceAt at = SourceAt::current()) { return binary(OpKind::MaxS, a, b, at); }

  Value convert(OpKind k, Value v, Elem to, SourceAt at = SourceAt::current()); // ExtS ExtU Trunc SIToFP ExtF TruncF Bitcast
  Value clampF(Value v, double bound, SourceAt at = SourceAt::current());       // to [-bound, bound], NaN kept

  Value splat(Value s, int lanes, SourceAt at = SourceAt::current());
  Value extract(Value t, int lane, SourceAt at = SourceAt::current());
  // Lane `lane` (an i64 scalar, in [0, lanes): out of range is undefined) of tile t.
  Value extractAt(Value t, Value lane, SourceAt at = SourceAt::current());
  Value shuffle(Value a, Value b, std::vector<int32_t> mask, SourceAt at = SourceAt::current()); // lanes of a then b
  Value reduceAdd(Value t, SourceAt at = SourceAt::current());
  Value reduceMax(Value t, SourceAt at = SourceAt::current());
  // tile<G*S x f32> -> tile<G x f32>: lane g is the fmaxf (NaN dropped) of lanes [g*S, g*S + S).
  Value reduceMaxGroups(Value t, int groups, SourceAt at = SourceAt::current());
  // tile<L x f32> -> tile<L/2 x f32>: the fmaxf of each pair of lanes i, i + d with bit d of i
  // clear (d a power of two, 2d dividing L), at lane (i / 2d) * d + i % d. A max over all lanes
  // may fold pairs first; which pairs is the kernel's choice (a layout's registers may hold them).
  Value foldMax(Value t, int d, SourceAt at = SourceAt::current());

  Value load(Buffer buf, Value offset, SourceAt at = SourceAt::current());
  Value loadTile(Buffer buf, Value offset, int lanes, SourceAt at = SourceAt::current());
  // The same, promising that the element at `offset` sits at an address aligned to alignBytes (a
  // power of two, at most 16) when the buffer's base is 16-byte aligned, as GPU backends require:
  // GPU targets then issue wide loads.
  Value loadTile(Buffer buf, Value offset, int lanes, int alignBytes, SourceAt at = SourceAt::current());
  // Lanes at or past `limit` (an i64 scalar) read 0 and touch no memory (Triton's masked load).
  Value loadTile(Buffer buf, Value offset, int lanes, Value limit, SourceAt at = SourceAt::current());
  // The same with offset's address aligned to alignBytes, as above.
  Value loadTile(Buffer buf, Value offset, int lanes, Value limit, int alignBytes,
                 SourceAt at = SourceAt::current());
  // Lane i: buf[offsets[i]] where mask[i], else 0 without touching memory (offsets tile<N x i64>,
  // mask tile<N x i1>; masked-off offsets may be anything): rows of a strided buffer gathered into
  // one tile, e.g. a thread's own row in its lanes.
  Value loadGather(Buffer buf, Value offsets, Value mask, SourceAt at = SourceAt::current());
  // Rows of `width` consecutive elements, R of them (starts and counts: tile<R x i64>): lane
  // r * width + k is buf[starts[r] + k] where k < counts[r], else 0 without touching memory, as
  // loadGather with those offsets and masks; each start's address aligned to alignBytes. A GPU
  // program whose threads each hold one row loads it as a plain (wide) load where the row is
  // whole, where loadGather's lanes are one load each, across threads' rows.
  Value loadRows(Buffer buf, Value starts, Value counts, int width, int alignBytes,
                 SourceAt at = SourceAt::current());
  void store(Buffer buf, Value offset, Value v, SourceAt at = SourceAt::current());
  void storeTile(Buffer buf, Value offset, Value v, SourceAt at = SourceAt::current());
  // The same with offset's address aligned to alignBytes, as loadTile's.
  void storeTile(Buffer buf, Value offset, Value v, int alignBytes, SourceAt at = SourceAt::current());
  // buf[offsets[i]] = v[i] for the lanes where mask[i] (offsets tile<N x i64>, mask tile<N x i1>);
  // masked-off lanes touch no memory, so their offsets may be anything.
  void storeScatter(Buffer buf, Value offsets, Value v, Value mask, SourceAt at = SourceAt::current());
  // buf[offset] += v (i32 or i64 scalars, a ReadWrite buffer) as one atomic step of the whole
  // program, returning the value before. Every store the program made before it is visible to a
  // program that later reads this atomic's result or a later one's on the same word, and the
  // program's loads after it see what such programs stored before theirs (the "last program to
  // arrive finishes the work" pattern: a device-scope release before, an acquire after).
  Value atomicAdd(Buffer buf, Value offset, Value v, SourceAt at = SourceAt::current());
  // The order of a step's kernels on a stream. Loads after awaitEarlierGrids see every store of
  // the kernels launched before this one; a target that starts a kernel's programs while the one
  // before it still runs (sm_90's programmatic dependent launch) waits there, elsewhere it is
  // nothing. Before it a program may read only what was written before the step's first kernel
  // (its metadata) and store nothing. At most one, not inside a loop.
  void awaitEarlierGrids(SourceAt at = SourceAt::current());
  // Lets the next kernel's programs start (up to their awaitEarlierGrids) once every program of
  // this one has passed here; without it they start as this kernel ends.
  void releaseNextGrid(SourceAt at = SourceAt::current());
  // Every store this program made before it is seen by every load it makes after it, whichever of
  // its lanes made either (a GPU workgroup's barrier; nothing where one thread runs a program).
  // Not inside a loop: every lane of a program must reach it, and the same number of times.
  void programSync(SourceAt at = SourceAt::current());

  // e4m3_rn_satfinite(E2M1(nibble) * E4M3(scale)) for every element: packed is tile<N/2 x i8>
  // (element 2i in the low nibble of byte i), scales tile<N/16 x i8>; result tile<N x f8E4M3FN>.
  Value decodeNvfp4(Value packed, Value scales, SourceAt at = SourceAt::current());
  // sum of a[i] * b[i] over f32 tiles in fp32; the order of the sum is the target's.
  Value dot(Value a, Value b, SourceAt at = SourceAt::current());
  // Every row of a against every row of b, rows being k consecutive lanes (Triton's tl.dot with b
  // transposed): a is tile<M*k>, b tile<N*k>, both f32 or both f8E4M3FN; the result is
  // tile<N*M x f32> with lane n*M + m = sum_i a[m*k + i] * b[n*k + i], in fp32 (exact products,
  // the target's order of the sum). Targets with matrix units run it on them.
  Value dotTiles(Value a, Value b, int k, SourceAt at = SourceAt::current());
  // SPEC §5 top-k key: (ordered bits of score, NaN -> -inf, -0 -> +0) << 32 | block; scalars, or
  // lane by lane for a tile of scores and a tile of blocks.
  Value packScoreKey(Value score, Value block, SourceAt at = SourceAt::current());

  // `unroll` > 1 is a hint: targets that gain from it may run that many trips per iteration (the
  // lowering decides per target; results are the same either way).
  Values forLoop(Value lo, Value hi, Value step, const Values &inits,
                 const std::function<Values(Value iv, const Values &iters)> &body, int unroll = 1, SourceAt at = SourceAt::current());
  // A loop with its loads one trip ahead (Triton's num_stages = 2): `load(iv)` makes a trip's
  // loads, `body(iv, loaded, iters)` its work on them. The builder expands it into the software
  // pipeline kernels otherwise write by hand: the first trip's loads before the loop, and in each
  // trip the next trip's loads issued before the work, carried to it. load runs for iv == hi once
  // (a result nobody reads), so its loads must be safe there: masked, or clamped by `load`.
  // Returns the iteration values (not the loads).
  Values pipelinedFor(Value lo, Value hi, Value step, const Values &inits,
                      const std::function<Values(Value iv)> &load,
                      const std::function<Values(Value iv, const Values &loaded, const Values &iters)> &body,
                      SourceAt at = SourceAt::current());
  // A loop whose trips' inputs are made ahead of the work by a producer (FlashAttention-3's warp
  // specialization; Triton's stages with producer warps): `produce(iv)` loads and computes trip
  // iv's staged values from iv and values made before the loop -- it sees no iteration value and
  // may not store, branch or loop -- and `consume(iv, staged, iters)` does the trip's work and
  // yields the iteration values. Step 1; up to `stages` (2 to 8) trips' staged values may be made
  // before they are consumed. The results are those of the same loop with produce's values used
  // directly, which is how a target without producer warps runs it (one group, trip by trip); a
  // target with them may run the roles on separate warps, the staged values in a ring of
  // `stages` buffers. The hand-over is one `stage` op in the loop's body.
  Values stagedFor(Value lo, Value hi, int stages, const Values &inits, const std::function<Values(Value iv)> &produce,
                   const std::function<Values(Value iv, const Values &staged, const Values &iters)> &consume,
                   SourceAt at = SourceAt::current());
  Values ifElse(Value cond, const std::function<Values()> &thenFn,
                const std::function<Values()> &elseFn, SourceAt at = SourceAt::current());
  void ifThen(Value cond, const std::function<void()> &thenFn, SourceAt at = SourceAt::current());

  StatusOr<Kernel> finish();

  Type typeOf(ValueId v) const { return k_.valueTypes[v.id]; }

private:
  friend class TileShape;
  // Sets the location of the ops the outermost builder call on the stack makes.
  class LocScope {
  public:
    LocScope(KernelBuilder &b, const SourceAt &at) : b_(b) {
      if (b_.locDepth_++ == 0)
        b_.loc_ = Loc{at.file_name(), static_cast<uint32_t>(at.line()), static_cast<uint32_t>(at.column())};
    }
    ~LocScope() { --b_.locDepth_; }

  private:
    KernelBuilder &b_;
  };
  void broadcast(Value &a, Value &b); // splats a scalar beside a tile
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
  // `loaded`, the result of the op just emitted (of `kind`), with its address promised aligned.
  Value aligned(Value loaded, OpKind kind, int alignBytes);
  Values runRegion(int32_t op, int region, const std::function<Values()> &fn);
  void gridOrder(OpKind kind, const char *what); // awaitEarlierGrids, releaseNextGrid
  bool insideLoop() const; // whether ops are being added to a loop's body (at any depth)

  Kernel k_;
  std::vector<Cursor> cursor_;
  std::optional<std::string> error_;
  bool argsClosed_ = false;
  Loc loc_;
  int locDepth_ = 0;
};

// A tile's lanes as a row-major grid (rows x heads x tokens, ...): index(d) is every lane's
// coordinate along dim d, from one iota made at the first index() (where the kernel needs it:
// lanes made early stay live), in `elem` (i64, or i32 where narrow lanes pay).
class TileShape {
public:
  TileShape(KernelBuilder &b, std::vector<int> dims, Elem elem = Elem::I64) : b_(b), dims_(std::move(dims)), elem_(elem) {}
  int lanes() const;
  Value index(int d, SourceAt at = SourceAt::current());

private:
  KernelBuilder &b_;
  std::vector<int> dims_;
  Elem elem_;
  Value iota_;
};

// An operator's left operand, with where the operator is used: taken as the implicit conversion's
// default argument, which is evaluated at the kernel's expression, so operators' ops carry the
// kernel line too.
struct Operand {
  Operand(Value v, SourceAt at = SourceAt::current()) : v(v), at(at) {}
  Value v;
  SourceAt at;
};

// Operators for kernel readability, on i64 / i32 / f32 values, tiles or scalars (broadcast as
// above); integer literals take the other operand's type. `/`, `%` and `<`... are signed; gtU and
// ltU compare unsigned, shrU shifts in zeros.
Value operator+(Operand a, Value b);
Value operator-(Operand a, Value b);
Value operator*(Operand a, Value b);
Value operator/(Operand a, Value b);
Value operator%(Operand a, Value b);
Value operator&(Operand a, Value b);
Value operator|(Operand a, Value b);
Value operator^(Operand a, Value b);
Value operator<<(Operand a, Value b);
Value operator<(Operand a, Value b);
Value operator<=(Operand a, Value b);
Value operator>(Operand a, Value b);
Value operator>=(Operand a, Value b);
Value operator==(Operand a, Value b);
Value operator!=(Operand a, Value b);
Value operator+(Operand a, int64_t b);
Value operator-(Operand a, int64_t b);
Value operator*(Operand a, int64_t b);
Value operator/(Operand a, int64_t b);
Value operator%(Operand a, int64_t b);
Value operator&(Operand a, int64_t b);
Value operator|(Operand a, int64_t b);
Value operator^(Operand a, int64_t b);
Value operator<<(Operand a, int64_t b);
Value operator<(Operand a, int64_t b);
Value operator<=(Operand a, int64_t b);
Value operator>(Operand a, int64_t b);
Value operator>=(Operand a, int64_t b);
Value operator==(Operand a, int64_t b);
Value operator!=(Operand a, int64_t b);
// n / d, and n / d with n % d, for i64 scalars n in [0, 2^32) (dsl/Divisor.h's numerators;
// others give wrong results) by a multiply and shifts.
struct QuotientRemainder {
  Value quotient, remainder;
};
Value divide(Value n, const Divisor &d, SourceAt at = SourceAt::current());
QuotientRemainder divideWithRemainder(Value n, const Divisor &d, SourceAt at = SourceAt::current());
Value shrU(Value a, Value b, SourceAt at = SourceAt::current());
Value shrU(Value a, int64_t b, SourceAt at = SourceAt::current());
Value gtU(Value a, Value b, SourceAt at = SourceAt::current());
Value ltU(Value a, Value b, SourceAt at = SourceAt::current());

} // namespace m3idx::dsl
