#include "dsl/Builder.h"

#include <algorithm>

#include <fmt/format.h>

#include "dsl/Divisor.h"

namespace m3idx::dsl {

Type Value::type() const { return b_->typeOf(id_); }

KernelBuilder::KernelBuilder(std::string name, int warps) {
  k_.name = std::move(name);
  k_.warps = warps;
  cursor_.push_back({-1, 0});
}

Region &KernelBuilder::current() {
  Cursor c = cursor_.back();
  return c.op < 0 ? k_.body : k_.ops[c.op].regions[c.region];
}

ValueId KernelBuilder::newValue(Type t) {
  k_.valueTypes.push_back(t);
  return ValueId{static_cast<int32_t>(k_.valueTypes.size() - 1)};
}

bool KernelBuilder::check(bool ok, const std::string &what) {
  if (!ok && !error_)
    error_ = fmt::format("kernel @{}: {}", k_.name, what);
  return ok;
}

bool KernelBuilder::live(std::initializer_list<Value> vs) {
  for (const Value &v : vs)
    if (!check(v.builder() == this && v.id().valid(),
               "an operand is not a value of this kernel (default-constructed or from another "
               "builder)"))
      return false;
  return true;
}

void KernelBuilder::broadcast(Value &a, Value &b) {
  const Type ta = a.type(), tb = b.type();
  if (ta.isTile() && !tb.isTile() && ta.elem == tb.elem)
    b = splat(b, ta.lanes);
  else if (tb.isTile() && !ta.isTile() && ta.elem == tb.elem)
    a = splat(a, tb.lanes);
}

Value KernelBuilder::poison(Type t) { return Value(this, newValue(t)); }

Values KernelBuilder::emit(OpKind kind, const Values &operands, const std::vector<Type> &results,
                           int64_t intAttr, double floatAttr, std::vector<int32_t> lanes) {
  argsClosed_ = true;
  Op op;
  op.kind = kind;
  for (const Value &v : operands)
    op.operands.push_back(v.id());
  Values out;
  for (const Type &t : results) {
    ValueId id = newValue(t);
    op.results.push_back(id);
    out.emplace_back(this, id);
  }
  op.intAttr = intAttr;
  op.floatAttr = floatAttr;
  op.lanesAttr = std::move(lanes);
  op.loc = loc_;
  k_.ops.push_back(std::move(op));
  current().ops.push_back(static_cast<int32_t>(k_.ops.size() - 1));
  return out;
}

Value KernelBuilder::emit1(OpKind kind, const Values &operands, Type result, int64_t intAttr,
                           double floatAttr, std::vector<int32_t> lanes) {
  return emit(kind, operands, {result}, intAttr, floatAttr, std::move(lanes))[0];
}

Buffer KernelBuilder::buffer(const std::string &name, Elem elem, Access access, SourceAt at) {
  LocScope scope(*this, at);
  check(!argsClosed_ && k_.scalars.empty(),
        fmt::format("buffer '{}' declared after scalar arguments or ops", name));
  k_.buffers.push_back({name, elem, access});
  return Buffer{static_cast<int>(k_.buffers.size() - 1), elem, access};
}

Value KernelBuilder::scalarArg(const std::string &name, Elem elem, SourceAt at) {
  LocScope scope(*this, at);
  check(!argsClosed_, fmt::format("scalar argument '{}' declared after ops", name));
  check(elem == Elem::I64 || elem == Elem::F32,
        fmt::format("scalar argument '{}' must be i64 or f32, got {}", name, elemName(elem)));
  check(!divisorOfWordName(name) || (!k_.scalars.empty() && k_.scalars.back().name == *divisorOfWordName(name)),
        fmt::format("scalar argument '{}' is a divisor's word: declare '{}' with divisorArg", name,
                    divisorOfWordName(name).value_or("")));
  k_.scalars.push_back({name, elem});
  Value v = emit1(OpKind::ScalarArg, {}, scalar(elem), static_cast<int64_t>(k_.scalars.size() - 1));
  argsClosed_ = false; // reading arguments does not close the signature
  return v;
}

Divisor KernelBuilder::divisorArg(const std::string &name, SourceAt at) {
  LocScope scope(*this, at);
  Divisor d;
  d.value = scalarArg(name, Elem::I64, at);
  d.word = scalarArg(divisorWordName(name), Elem::I64, at);
  return d;
}

Value KernelBuilder::programId(SourceAt at) {
  LocScope scope(*this, at);
  return emit1(OpKind::ProgramId, {}, scalar(Elem::I64));
}

Value KernelBuilder::constInt(int64_t v, Elem e, SourceAt at) {
  LocScope scope(*this, at);
  check(isInt(e), fmt::format("constInt of type {}", elemName(e)));
  return emit1(OpKind::ConstInt, {}, scalar(e), v);
}

Value KernelBuilder::constF32(double v, SourceAt at) {
  LocScope scope(*this, at);
  return emit1(OpKind::ConstFloat, {}, scalar(Elem::F32), 0, v);
}

Value KernelBuilder::constLike(Value like, double v, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({like}))
    return poison(scalar(Elem::I64));
  Type t = like.type();
  Value s = isFloat(t.elem) ? constF32(v) : constInt(static_cast<int64_t>(v), t.elem);
  check(t.elem == Elem::F32 || isInt(t.elem),
        fmt::format("constant like a value of type {}", t.str()));
  return t.isTile() ? splat(s, t.lanes) : s;
}

Value KernelBuilder::iota(int lanes, SourceAt at) {
  LocScope scope(*this, at);
  check(lanes > 0, "iota needs lanes > 0");
  return emit1(OpKind::Iota, {}, tile(Elem::I64, lanes));
}

Value KernelBuilder::binary(OpKind k, Value a, Value b, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({a, b}))
    return poison(scalar(Elem::I64));
  broadcast(a, b);
  Type t = a.type();
  check(t == b.type(), fmt::format("{}: operand types differ ({} vs {})", opName(k), t.str(),
                                   b.type().str()));
  switch (k) {
  case OpKind::Add: case OpKind::Sub: case OpKind::Mul:
    check(isInt(t.elem) || t.elem == Elem::F32,
          fmt::format("{}: needs integer or f32 operands, got {}", opName(k), t.str()));
    break;
  case OpKind::MaxNumF:
    check(t.elem == Elem::F32, fmt::format("maxnumf: needs f32 operands, got {}", t.str()));
    break;
  default:
    check(isInt(t.elem), fmt::format("{}: needs integer operands, got {}", opName(k), t.str()));
  }
  return emit1(k, {a, b}, t);
}

Value KernelBuilder::cmp(OpKind k, Value a, Value b, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({a, b}))
    return poison(scalar(Elem::I1));
  broadcast(a, b);
  Type t = a.type();
  check(t == b.type(), fmt::format("{}: operand types differ ({} vs {})", opName(k), t.str(),
                                   b.type().str()));
  bool floatPred = k == OpKind::CmpUnordF || k == OpKind::CmpEqF;
  check(floatPred ? t.elem == Elem::F32 : isInt(t.elem),
        fmt::format("{}: wrong operand type {}", opName(k), t.str()));
  return emit1(k, {a, b}, t.withElem(Elem::I1));
}

Value KernelBuilder::select(Value c, Value a, Value b, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({c, a, b}))
    return poison(scalar(Elem::I64));
  broadcast(a, b);
  if (c.type().isTile() && !a.type().isTile()) {
    a = splat(a, c.type().lanes);
    b = splat(b, c.type().lanes);
  }
  check(a.type() == b.type(), fmt::format("select: branch types differ ({} vs {})",
                                          a.type().str(), b.type().str()));
  check(c.type().elem == Elem::I1 && (!c.type().isTile() || c.type().lanes == a.type().lanes),
        fmt::format("select: condition must be i1 with the branches' lanes, got {}",
                    c.type().str()));
  return emit1(OpKind::Select, {c, a, b}, a.type());
}

Value KernelBuilder::convert(OpKind k, Value v, Elem to, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({v}))
    return poison(scalar(to));
  Type from = v.type();
  int fb = elemBits(from.elem), tb = elemBits(to);
  bool ok = false;
  switch (k) {
  case OpKind::ExtS: case OpKind::ExtU: ok = isInt(from.elem) && isInt(to) && tb > fb; break;
  case OpKind::Trunc: ok = isInt(from.elem) && isInt(to) && tb < fb; break;
  case OpKind::SIToFP: ok = isInt(from.elem) && to == Elem::F32; break;
  case OpKind::ExtF:
    ok = (from.elem == Elem::F8E4M3FN || from.elem == Elem::F4E2M1FN) && to == Elem::F32;
    break;
  case OpKind::TruncF: ok = from.elem == Elem::F32 && to == Elem::F8E4M3FN; break;
  case OpKind::Bitcast: ok = fb == tb && from.elem != to; break;
  default: break;
  }
  check(ok, fmt::format("{}: cannot convert {} to {}", opName(k), from.str(), elemName(to)));
  return emit1(k, {v}, from.withElem(to));
}

Value KernelBuilder::clampF(Value v, double bound, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({v}))
    return poison(scalar(Elem::F32));
  check(v.type().elem == Elem::F32 && bound > 0,
        fmt::format("clampf: needs f32 and a positive bound, got {}", v.type().str()));
  return emit1(OpKind::ClampF, {v}, v.type(), 0, bound);
}

Value KernelBuilder::splat(Value s, int lanes, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({s}))
    return poison(tile(Elem::I64, lanes));
  check(!s.type().isTile() && lanes > 0,
        fmt::format("splat: needs a scalar and lanes > 0, got {}", s.type().str()));
  return emit1(OpKind::Splat, {s}, tile(s.type().elem, lanes));
}

Value KernelBuilder::extract(Value t, int lane, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({t}))
    return poison(scalar(Elem::I64));
  check(t.type().isTile() && lane >= 0 && lane < t.type().lanes,
        fmt::format("extract: lane {} of {}", lane, t.type().str()));
  return emit1(OpKind::Extract, {t}, scalar(t.type().elem), lane);
}

Value KernelBuilder::extractAt(Value t, Value lane, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({t, lane}))
    return poison(scalar(Elem::I64));
  check(t.type().isTile() && lane.type() == scalar(Elem::I64),
        fmt::format("extract.at: needs a tile and an i64 lane, got {} and {}", t.type().str(),
                    lane.type().str()));
  return emit1(OpKind::ExtractAt, {t, lane}, scalar(t.type().elem));
}

Value KernelBuilder::shuffle(Value a, Value b, std::vector<int32_t> mask, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({a, b}))
    return poison(tile(Elem::I64, static_cast<int>(mask.size())));
  Type t = a.type();
  check(t.isTile() && t == b.type(), fmt::format("shuffle: needs two tiles of one type, got {} "
                                                 "and {}",
                                                 t.str(), b.type().str()));
  for (int32_t m : mask)
    check(m >= 0 && m < 2 * t.lanes, fmt::format("shuffle: lane {} out of [0, {})", m, 2 * t.lanes));
  check(!mask.empty(), "shuffle: empty mask");
  const int lanes = static_cast<int>(mask.size());
  return emit1(OpKind::Shuffle, {a, b}, tile(t.elem, lanes), 0, 0, std::move(mask));
}

Value KernelBuilder::reduceAdd(Value t, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({t}))
    return poison(scalar(Elem::F32));
  check(t.type().isTile() && (t.type().elem == Elem::F32 || isInt(t.type().elem)),
        fmt::format("reduce.add: needs an f32 or integer tile, got {}", t.type().str()));
  return emit1(OpKind::ReduceAdd, {t}, scalar(t.type().elem));
}

Value KernelBuilder::reduceMax(Value t, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({t}))
    return poison(scalar(Elem::F32));
  check(t.type().isTile() && (t.type().elem == Elem::F32 || isInt(t.type().elem)),
        fmt::format("reduce.max: needs an f32 or integer tile, got {}", t.type().str()));
  return emit1(OpKind::ReduceMax, {t}, scalar(t.type().elem));
}

Value KernelBuilder::reduceMaxGroups(Value t, int groups, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({t}))
    return poison(tile(Elem::F32, std::max(groups, 1)));
  check(t.type().isTile() && t.type().elem == Elem::F32 && groups > 0 && t.type().lanes % groups == 0,
        fmt::format("reduce.max.groups: needs an f32 tile of a multiple of {} lanes, got {}", groups,
                    t.type().str()));
  return emit1(OpKind::ReduceMaxGroups, {t}, tile(Elem::F32, std::max(groups, 1)), groups);
}

Value KernelBuilder::foldMax(Value t, int d, SourceAt at) {
  LocScope scope(*this, at);
  const int lanes = t.type().lanes;
  if (!live({t}))
    return poison(tile(Elem::F32, std::max(lanes / 2, 1)));
  check(t.type().isTile() && t.type().elem == Elem::F32 && d > 0 && (d & (d - 1)) == 0 && lanes % (2 * d) == 0,
        fmt::format("fold.max: needs an f32 tile whose lanes are a multiple of 2 x {} (a power of two), got {}",
                    d, t.type().str()));
  return emit1(OpKind::FoldMax, {t}, tile(Elem::F32, std::max(lanes / 2, 1)), d);
}

Value KernelBuilder::load(Buffer buf, Value offset, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({offset}))
    return poison(scalar(buf.elem));
  check(buf.index >= 0 && buf.index < static_cast<int>(k_.buffers.size()), "load: unknown buffer");
  check(offset.type() == scalar(Elem::I64),
        fmt::format("load: offset must be i64, got {}", offset.type().str()));
  check(buf.access != Access::Write, "load: buffer is write-only");
  return emit1(OpKind::Load, {offset}, scalar(buf.elem), buf.index);
}

Value KernelBuilder::loadTile(Buffer buf, Value offset, int lanes, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({offset}))
    return poison(tile(buf.elem, lanes));
  check(buf.index >= 0 && buf.index < static_cast<int>(k_.buffers.size()),
        "load.tile: unknown buffer");
  check(offset.type() == scalar(Elem::I64),
        fmt::format("load.tile: offset must be i64, got {}", offset.type().str()));
  check(lanes > 0, "load.tile: lanes must be > 0");
  check(buf.access != Access::Write, "load.tile: buffer is write-only");
  return emit1(OpKind::LoadTile, {offset}, tile(buf.elem, lanes), buf.index);
}

Value KernelBuilder::loadTile(Buffer buf, Value offset, int lanes, Value limit, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({offset, limit}))
    return poison(tile(buf.elem, lanes));
  check(buf.index >= 0 && buf.index < static_cast<int>(k_.buffers.size()),
        "load.tile.masked: unknown buffer");
  check(offset.type() == scalar(Elem::I64) && limit.type() == scalar(Elem::I64),
        fmt::format("load.tile.masked: offset and limit must be i64, got {} and {}",
                    offset.type().str(), limit.type().str()));
  check(lanes > 0, "load.tile.masked: lanes must be > 0");
  check(buf.access != Access::Write, "load.tile.masked: buffer is write-only");
  return emit1(OpKind::LoadTileMasked, {offset, limit}, tile(buf.elem, lanes), buf.index);
}

Value KernelBuilder::aligned(Value loaded, OpKind kind, int alignBytes) {
  if (!check(alignBytes > 0 && alignBytes <= 16 && (alignBytes & (alignBytes - 1)) == 0,
             fmt::format("{}: alignment must be a power of two up to 16, got {}", opName(kind), alignBytes)))
    return loaded;
  if (loaded.id().valid() && !k_.ops.empty() && k_.ops.back().kind == kind)
    k_.ops.back().alignAttr = alignBytes;
  return loaded;
}

Value KernelBuilder::loadTile(Buffer buf, Value offset, int lanes, int alignBytes, SourceAt at) {
  LocScope scope(*this, at);
  return aligned(loadTile(buf, offset, lanes), OpKind::LoadTile, alignBytes);
}

Value KernelBuilder::loadTile(Buffer buf, Value offset, int lanes, Value limit, int alignBytes, SourceAt at) {
  LocScope scope(*this, at);
  return aligned(loadTile(buf, offset, lanes, limit), OpKind::LoadTileMasked, alignBytes);
}

Value KernelBuilder::loadGather(Buffer buf, Value offsets, Value mask, SourceAt at) {
  LocScope scope(*this, at);
  const int lanes = offsets.type().isTile() ? offsets.type().lanes : 1;
  if (!live({offsets, mask}))
    return poison(tile(buf.elem, lanes));
  check(buf.index >= 0 && buf.index < static_cast<int>(k_.buffers.size()), "load.gather: unknown buffer");
  check(offsets.type().isTile() && offsets.type() == tile(Elem::I64, lanes) && mask.type() == tile(Elem::I1, lanes),
        fmt::format("load.gather: offsets {} and mask {} must be i64 and i1 tiles of one lane count",
                    offsets.type().str(), mask.type().str()));
  check(buf.access != Access::Write, "load.gather: buffer is write-only");
  return emit1(OpKind::LoadGather, {offsets, mask}, tile(buf.elem, lanes), buf.index);
}

Value KernelBuilder::loadRows(Buffer buf, Value starts, Value counts, int width, int alignBytes, SourceAt at) {
  LocScope scope(*this, at);
  const int rows = starts.type().isTile() ? starts.type().lanes : 1;
  if (!live({starts, counts}))
    return poison(tile(buf.elem, rows * width));
  check(buf.index >= 0 && buf.index < static_cast<int>(k_.buffers.size()), "load.rows: unknown buffer");
  check(starts.type().isTile() && starts.type() == tile(Elem::I64, rows) && counts.type() == starts.type(),
        fmt::format("load.rows: starts {} and counts {} must be i64 tiles of one lane count", starts.type().str(),
                    counts.type().str()));
  check(width > 0, "load.rows: width must be > 0");
  check(buf.access != Access::Write, "load.rows: buffer is write-only");
  return aligned(emit1(OpKind::LoadRows, {starts, counts}, tile(buf.elem, rows * width), buf.index),
                 OpKind::LoadRows, alignBytes);
}

void KernelBuilder::store(Buffer buf, Value offset, Value v, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({offset, v}))
    return;
  check(offset.type() == scalar(Elem::I64),
        fmt::format("store: offset must be i64, got {}", offset.type().str()));
  check(v.type() == scalar(buf.elem), fmt::format("store: value {} into a buffer of {}",
                                                  v.type().str(), elemName(buf.elem)));
  check(buf.access != Access::Read, "store: buffer is read-only");
  emit(OpKind::Store, {offset, v}, {}, buf.index);
}

Value KernelBuilder::atomicAdd(Buffer buf, Value offset, Value v, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({offset, v}))
    return poison(scalar(buf.elem));
  check(buf.index >= 0 && buf.index < static_cast<int>(k_.buffers.size()), "atomic.add: unknown buffer");
  check(offset.type() == scalar(Elem::I64),
        fmt::format("atomic.add: offset must be i64, got {}", offset.type().str()));
  check((buf.elem == Elem::I32 || buf.elem == Elem::I64) && v.type() == scalar(buf.elem),
        fmt::format("atomic.add: needs an i32 or i64 scalar into a buffer of its type, got {} into {}",
                    v.type().str(), elemName(buf.elem)));
  check(buf.access == Access::ReadWrite, "atomic.add: buffer is not read_write");
  return emit1(OpKind::AtomicAdd, {offset, v}, scalar(buf.elem), buf.index);
}

namespace {

bool isStore(OpKind k) {
  return k == OpKind::Store || k == OpKind::StoreTile || k == OpKind::StoreScatter || k == OpKind::AtomicAdd;
}

} // namespace

bool KernelBuilder::insideLoop() const {
  for (const Cursor &c : cursor_)
    if (c.op >= 0 && k_.ops[c.op].kind == OpKind::For)
      return true;
  return false;
}

void KernelBuilder::gridOrder(OpKind kind, const char *what) {
  check(!insideLoop(), fmt::format("{}: inside a loop (once per program)", what));
  for (const Op &op : k_.ops) {
    check(op.kind != kind, fmt::format("{}: a second one (once per program)", what));
    check(kind != OpKind::GridAwait || !isStore(op.kind),
          fmt::format("{}: after a {} (a program stores nothing before it)", what, opName(op.kind)));
  }
  emit(kind, {}, {});
}

void KernelBuilder::awaitEarlierGrids(SourceAt at) {
  LocScope scope(*this, at);
  gridOrder(OpKind::GridAwait, "grid.await");
}

void KernelBuilder::releaseNextGrid(SourceAt at) {
  LocScope scope(*this, at);
  gridOrder(OpKind::GridRelease, "grid.release");
}

void KernelBuilder::programSync(SourceAt at) {
  LocScope scope(*this, at);
  check(!insideLoop(), "program.sync: inside a loop");
  emit(OpKind::ProgramSync, {}, {});
}

void KernelBuilder::storeTile(Buffer buf, Value offset, Value v, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({offset, v}))
    return;
  check(offset.type() == scalar(Elem::I64),
        fmt::format("store.tile: offset must be i64, got {}", offset.type().str()));
  check(v.type().isTile() && v.type().elem == buf.elem,
        fmt::format("store.tile: value {} into a buffer of {}", v.type().str(), elemName(buf.elem)));
  check(buf.access != Access::Read, "store.tile: buffer is read-only");
  emit(OpKind::StoreTile, {offset, v}, {}, buf.index);
}

void KernelBuilder::storeTile(Buffer buf, Value offset, Value v, int alignBytes, SourceAt at) {
  LocScope scope(*this, at);
  const size_t before = k_.ops.size();
  storeTile(buf, offset, v);
  if (check(alignBytes > 0 && alignBytes <= 16 && (alignBytes & (alignBytes - 1)) == 0,
            fmt::format("store.tile: alignment must be a power of two up to 16, got {}", alignBytes)) &&
      k_.ops.size() == before + 1)
    k_.ops.back().alignAttr = alignBytes;
}

void KernelBuilder::storeScatter(Buffer buf, Value offsets, Value v, Value mask, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({offsets, v, mask}))
    return;
  check(v.type().isTile() && v.type().elem == buf.elem,
        fmt::format("store.scatter: value {} into a buffer of {}", v.type().str(), elemName(buf.elem)));
  check(offsets.type() == tile(Elem::I64, v.type().lanes) && mask.type() == tile(Elem::I1, v.type().lanes),
        fmt::format("store.scatter: offsets {} and mask {} must be i64 and i1 tiles of the value's {} lanes",
                    offsets.type().str(), mask.type().str(), v.type().lanes));
  check(buf.access != Access::Read, "store.scatter: buffer is read-only");
  emit(OpKind::StoreScatter, {offsets, v, mask}, {}, buf.index);
}

Value KernelBuilder::decodeNvfp4(Value packed, Value scales, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({packed, scales}))
    return poison(tile(Elem::F8E4M3FN, 2));
  Type p = packed.type(), s = scales.type();
  check(p.isTile() && p.elem == Elem::I8 && s.isTile() && s.elem == Elem::I8 &&
            p.lanes == 8 * s.lanes,
        fmt::format("nvfp4.decode: needs packed tile<8k x i8> and scales tile<k x i8>, got {} "
                    "and {}",
                    p.str(), s.str()));
  return emit1(OpKind::DecodeNvfp4, {packed, scales}, tile(Elem::F8E4M3FN, 2 * p.lanes));
}

Value KernelBuilder::dot(Value a, Value b, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({a, b}))
    return poison(scalar(Elem::F32));
  check(a.type().isTile() && a.type().elem == Elem::F32 && a.type() == b.type(),
        fmt::format("dot: needs two f32 tiles of one length, got {} and {}", a.type().str(),
                    b.type().str()));
  return emit1(OpKind::Dot, {a, b}, scalar(Elem::F32));
}

Value KernelBuilder::dotTiles(Value a, Value b, int k, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({a, b}))
    return poison(tile(Elem::F32, 1));
  Type ta = a.type(), tb = b.type();
  const bool ok = ta.isTile() && tb.isTile() && ta.elem == tb.elem &&
                  (ta.elem == Elem::F32 || ta.elem == Elem::F8E4M3FN) && k > 0 &&
                  ta.lanes % k == 0 && tb.lanes % k == 0;
  check(ok, fmt::format("dot.tiles: needs two f32 or two f8E4M3FN tiles of whole rows of {}, got "
                        "{} and {}",
                        k, ta.str(), tb.str()));
  if (!ok)
    return poison(tile(Elem::F32, 1));
  return emit1(OpKind::DotTiles, {a, b}, tile(Elem::F32, (ta.lanes / k) * (tb.lanes / k)), k);
}

Value KernelBuilder::packScoreKey(Value score, Value block, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({score, block}))
    return poison(scalar(Elem::I64));
  const int lanes = score.type().lanes;
  check(score.type() == Type{Elem::F32, lanes} && block.type() == Type{Elem::I64, lanes},
        fmt::format("topk.pack_key: needs f32 scores and i64 blocks of one shape, got {} and {}",
                    score.type().str(), block.type().str()));
  return emit1(OpKind::PackScoreKey, {score, block}, Type{Elem::I64, lanes});
}

Values KernelBuilder::runRegion(int32_t op, int region, const std::function<Values()> &fn) {
  cursor_.push_back({op, region});
  // The body's calls are the kernel's own: each sets its ops' location again.
  const int depth = locDepth_;
  const Loc loc = loc_;
  locDepth_ = 0;
  Values yielded = fn();
  locDepth_ = depth;
  loc_ = loc;
  Values checked;
  for (const Value &v : yielded)
    if (live({v}))
      checked.push_back(v);
  emit(OpKind::Yield, checked, {});
  cursor_.pop_back();
  return checked;
}

Values KernelBuilder::forLoop(Value lo, Value hi, Value step, const Values &inits,
                              const std::function<Values(Value, const Values &)> &body, int unroll, SourceAt at) {
  LocScope scope(*this, at);
  std::vector<Type> types;
  for (const Value &v : inits)
    types.push_back(live({v}) ? v.type() : scalar(Elem::I64));
  if (!live({lo, hi, step}))
    return {};
  for (Value v : {lo, hi, step})
    check(v.type() == scalar(Elem::I64),
          fmt::format("for: bounds and step must be i64, got {}", v.type().str()));
  Values operands = {lo, hi, step};
  operands.insert(operands.end(), inits.begin(), inits.end());
  check(unroll >= 1, fmt::format("for: unroll must be at least 1, got {}", unroll));
  Values results = emit(OpKind::For, operands, types, unroll);
  const int32_t op = static_cast<int32_t>(k_.ops.size() - 1);
  k_.ops[op].regions.resize(1);
  Value iv(this, newValue(scalar(Elem::I64)));
  k_.ops[op].regions[0].args.push_back(iv.id());
  Values iters;
  for (const Type &t : types) {
    Value a(this, newValue(t));
    k_.ops[op].regions[0].args.push_back(a.id());
    iters.push_back(a);
  }
  Values yielded = runRegion(op, 0, [&] { return body(iv, iters); });
  check(yielded.size() == types.size(),
        fmt::format("for: body yields {} values for {} iter args", yielded.size(), types.size()));
  for (size_t i = 0; i < std::min(yielded.size(), types.size()); ++i)
    check(yielded[i].type() == types[i],
          fmt::format("for: iter arg {} is {} but the body yields {}", i, types[i].str(),
                      yielded[i].type().str()));
  return results;
}

Values KernelBuilder::pipelinedFor(Value lo, Value hi, Value step, const Values &inits,
                                  const std::function<Values(Value)> &load,
                                  const std::function<Values(Value, const Values &, const Values &)> &body,
                                  SourceAt at) {
  LocScope scope(*this, at);
  const size_t n = inits.size();
  Values carried = inits;
  size_t loads = 0;
  {
    // The first trip's loads are the kernel's own calls: their lines are load's.
    const int depth = locDepth_;
    locDepth_ = 0;
    Values first = load(lo);
    locDepth_ = depth;
    loads = first.size();
    carried.insert(carried.end(), first.begin(), first.end());
  }
  Values out = forLoop(
      lo, hi, step, carried,
      [&](Value iv, const Values &it) {
        Value following;
        {
          LocScope scope(*this, at);
          following = iv + step;
        }
        Values next = load(following);
        check(next.size() == loads, fmt::format("pipelined for: load makes {} values, then {}", loads, next.size()));
        Values result = body(iv, Values(it.begin() + n, it.end()), Values(it.begin(), it.begin() + n));
        result.insert(result.end(), next.begin(), next.end());
        return result;
      },
      1, at);
  out.resize(std::min(out.size(), n));
  return out;
}

Values KernelBuilder::stagedFor(Value lo, Value hi, int stages, const Values &inits,
                                const std::function<Values(Value)> &produce,
                                const std::function<Values(Value, const Values &, const Values &)> &consume,
                                SourceAt at) {
  LocScope scope(*this, at);
  check(stages >= 2 && stages <= 8, fmt::format("staged for: stages must be 2 to 8, got {}", stages));
  return forLoop(
      lo, hi, constInt(1), inits,
      [&](Value iv, const Values &iters) {
        const size_t first = current().ops.size();
        Values made = produce(iv);
        // The producer runs ahead of the consumer's trips, on other warps where a target has them:
        // it may only compute from iv and values made before the loop, and store nothing.
        for (size_t i = first; i < current().ops.size(); ++i) {
          const OpKind kind = k_.ops[current().ops[i]].kind;
          const bool ok = kind != OpKind::Store && kind != OpKind::StoreTile && kind != OpKind::StoreScatter &&
                          kind != OpKind::AtomicAdd && kind != OpKind::GridAwait && kind != OpKind::GridRelease &&
                          kind != OpKind::ProgramSync &&
                          kind != OpKind::For && kind != OpKind::If && kind != OpKind::Stage;
          check(ok, fmt::format("staged for: the producer may not {} (it only loads and computes)", opName(kind)));
        }
        check(!made.empty(), "staged for: the producer stages no value");
        std::vector<Type> types;
        for (const Value &v : made)
          types.push_back(live({v}) ? v.type() : scalar(Elem::I64));
        Values staged;
        {
          LocScope s(*this, at);
          staged = emit(OpKind::Stage, made, types, stages);
        }
        return consume(iv, staged, iters);
      },
      1, at);
}

Values KernelBuilder::ifElse(Value cond, const std::function<Values()> &thenFn,
                             const std::function<Values()> &elseFn, SourceAt at) {
  LocScope scope(*this, at);
  if (!live({cond}))
    return {};
  check(cond.type() == scalar(Elem::I1),
        fmt::format("if: condition must be a scalar i1, got {}", cond.type().str()));
  // Result types come from the then-branch; build it first into a detached op.
  Values results = emit(OpKind::If, {cond}, {});
  const int32_t op = static_cast<int32_t>(k_.ops.size() - 1);
  k_.ops[op].regions.resize(2);
  Values thenVals = runRegion(op, 0, thenFn);
  Values elseVals = runRegion(op, 1, elseFn);
  check(thenVals.size() == elseVals.size(),
        fmt::format("if: branches yield {} and {} values", thenVals.size(), elseVals.size()));
  Values out;
  for (size_t i = 0; i < std::min(thenVals.size(), elseVals.size()); ++i) {
    check(thenVals[i].type() == elseVals[i].type(),
          fmt::format("if: result {} is {} in then and {} in else", i, thenVals[i].type().str(),
                      elseVals[i].type().str()));
    ValueId id = newValue(thenVals[i].type());
    k_.ops[op].results.push_back(id);
    out.emplace_back(this, id);
  }
  return out;
}

void KernelBuilder::ifThen(Value cond, const std::function<void()> &thenFn, SourceAt at) {
  LocScope scope(*this, at);
  ifElse(
      cond, [&] { thenFn(); return Values{}; }, [] { return Values{}; });
}

StatusOr<Kernel> KernelBuilder::finish() {
  if (error_)
    return Status::error(*error_);
  if (k_.warps < 1 || k_.warps > 32) // a CTA has at most 1024 threads
    return Status::error(fmt::format("kernel @{}: {} warps per program (expected 1..32)", k_.name, k_.warps));
  return k_;
}

int TileShape::lanes() const {
  int n = 1;
  for (int d : dims_)
    n *= d;
  return n;
}

// (iota / stride) % dim, leaving out the division for the last dim and the remainder for the
// first: the expressions a kernel writes by hand.
Value TileShape::index(int d, SourceAt at) {
  if (!b_.check(d >= 0 && d < static_cast<int>(dims_.size()),
                fmt::format("tile shape: no dim {} in a shape of {} dims", d, dims_.size())))
    return b_.poison(tile(elem_, lanes()));
  if (!iota_.id().valid()) {
    iota_ = b_.iota(lanes(), at);
    if (elem_ != Elem::I64)
      iota_ = iota_.to(elem_, at);
  }
  int stride = 1;
  for (size_t i = d + 1; i < dims_.size(); ++i)
    stride *= dims_[i];
  Value v = stride > 1 ? Operand(iota_, at) / stride : iota_;
  return d > 0 ? Operand(v, at) % dims_[d] : v;
}

Value Value::to(Elem e, SourceAt at) const {
  const Type t = type();
  if (t.elem == e)
    return *this;
  OpKind k = OpKind::ExtS;
  if (isInt(t.elem) && isInt(e))
    k = elemBits(e) > elemBits(t.elem) ? OpKind::ExtS : OpKind::Trunc;
  else if (isInt(t.elem))
    k = OpKind::SIToFP;
  else if (isInt(e))
    k = OpKind::SIToFP; // refused by convert, naming both types: the DSL converts no float to an integer
  else
    k = e == Elem::F32 ? OpKind::ExtF : OpKind::TruncF;
  return b_->convert(k, *this, e, at);
}
Value Value::zext(Elem e, SourceAt at) const { return b_->convert(OpKind::ExtU, *this, e, at); }
Value Value::bitcast(Elem e, SourceAt at) const { return b_->convert(OpKind::Bitcast, *this, e, at); }

namespace {
Value lit(Value like, int64_t v, SourceAt at) { return like.builder()->constLike(like, static_cast<double>(v), at); }
Value bin(OpKind k, const Operand &a, Value b) { return a.v.builder()->binary(k, a.v, b, a.at); }
Value cmp(OpKind k, const Operand &a, Value b) { return a.v.builder()->cmp(k, a.v, b, a.at); }
} // namespace

Value operator+(Operand a, Value b) { return bin(OpKind::Add, a, b); }
Value operator-(Operand a, Value b) { return bin(OpKind::Sub, a, b); }
Value operator*(Operand a, Value b) { return bin(OpKind::Mul, a, b); }
Value operator/(Operand a, Value b) { return bin(OpKind::DivS, a, b); }
Value operator%(Operand a, Value b) { return bin(OpKind::RemS, a, b); }
Value operator&(Operand a, Value b) { return bin(OpKind::And, a, b); }
Value operator|(Operand a, Value b) { return bin(OpKind::Or, a, b); }
Value operator^(Operand a, Value b) { return bin(OpKind::Xor, a, b); }
Value operator<<(Operand a, Value b) { return bin(OpKind::Shl, a, b); }
Value operator<(Operand a, Value b) { return cmp(OpKind::CmpLtS, a, b); }
Value operator<=(Operand a, Value b) { return cmp(OpKind::CmpLeS, a, b); }
Value operator>(Operand a, Value b) { return cmp(OpKind::CmpGtS, a, b); }
Value operator>=(Operand a, Value b) { return cmp(OpKind::CmpGeS, a, b); }
Value operator==(Operand a, Value b) { return cmp(OpKind::CmpEq, a, b); }
Value operator!=(Operand a, Value b) { return cmp(OpKind::CmpNe, a, b); }
// The literal is made at the operator's location, before the op, as a kernel writing
// b.splat(b.constInt(v), lanes) by hand would.
#define M3IDX_LITERAL_OPERATOR(op)                                                                        \
  Value operator op(Operand a, int64_t b) { return Operand(a.v, a.at) op lit(a.v, b, a.at); }
M3IDX_LITERAL_OPERATOR(+)
M3IDX_LITERAL_OPERATOR(-)
M3IDX_LITERAL_OPERATOR(*)
M3IDX_LITERAL_OPERATOR(/)
M3IDX_LITERAL_OPERATOR(%)
M3IDX_LITERAL_OPERATOR(&)
M3IDX_LITERAL_OPERATOR(|)
M3IDX_LITERAL_OPERATOR(^)
M3IDX_LITERAL_OPERATOR(<<)
M3IDX_LITERAL_OPERATOR(<)
M3IDX_LITERAL_OPERATOR(<=)
M3IDX_LITERAL_OPERATOR(>)
M3IDX_LITERAL_OPERATOR(>=)
M3IDX_LITERAL_OPERATOR(==)
M3IDX_LITERAL_OPERATOR(!=)
#undef M3IDX_LITERAL_OPERATOR
Value divide(Value n, const Divisor &d, SourceAt at) {
  // dsl/Divisor.h: q = (((n * m) >> 32) + n) >> l, the product unsigned in 64 bits (n, m < 2^32).
  Value m = d.word & lit(d.word, 0xFFFFFFFF, at);
  Value l = shrU(d.word, 32, at);
  return shrU(shrU(Operand(n, at) * m, 32, at) + n, l, at);
}

QuotientRemainder divideWithRemainder(Value n, const Divisor &d, SourceAt at) {
  Value q = divide(n, d, at);
  return {q, Operand(n, at) - q * d.value};
}

Value shrU(Value a, Value b, SourceAt at) { return a.builder()->binary(OpKind::ShrU, a, b, at); }
Value shrU(Value a, int64_t b, SourceAt at) { return shrU(a, lit(a, b, at), at); }
Value gtU(Value a, Value b, SourceAt at) { return a.builder()->cmp(OpKind::CmpGtU, a, b, at); }
Value ltU(Value a, Value b, SourceAt at) { return a.builder()->cmp(OpKind::CmpGtU, b, a, at); }

} // namespace m3idx::dsl
