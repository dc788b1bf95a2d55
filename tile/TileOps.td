// The m3idx tile dialect: the DSL's ops (dsl/Ir.h) that upstream MLIR has no op for. A kernel is a
// func.func whose buffers are memref<?xT> (with an m3idx.access argument attribute) and whose
// scalars are i64 / i32 / f32 values; a tile of N lanes is a 1-D tensor<N x T> (the encoding slot
// is where layouts will go); elementwise math, compares, selects and conversions are arith ops
// on scalars or tiles, structure is scf.for / scf.if / scf.yield, splat is tensor.splat. Each DSL
// op maps to one op (tile/FromDsl.cpp). Verifiers state the DSL builder's shape rules.
#ifndef M3IDX_TILE_OPS
#define M3IDX_TILE_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Tile_Dialect : Dialect {
  let name = "m3idx";
  let cppNamespace = "::m3idx::tile";
  let summary = "m3idx's tile ops: NVFP4 decode, dots, lane permutations, reductions, buffer access";
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect", "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
  let useDefaultAttributePrinterParser = 1;
}

// How a tile's lanes are spread over a GPU program's threads: the encoding of a tile's tensor type,
// assigned by a target's layout pass (sm_90: lowering/nvvm/Sm90Layouts.cpp; every other target
// leaves tiles blocked). lowering/Spread.h says what each one holds where.
def Tile_Layout : I32EnumAttr<"Layout", "a tile's spread over a program's threads", [
    I32EnumAttrCase<"Blocked", 0, "blocked">,
    I32EnumAttrCase<"MmaRows", 1, "mma_rows">,
    I32EnumAttrCase<"MmaAcc", 2, "mma_acc">,
    I32EnumAttrCase<"WgmmaAcc", 3, "wgmma_acc">,
    I32EnumAttrCase<"WgmmaAccFolded", 4, "wgmma_acc_folded">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::m3idx::tile";
}
def Tile_LayoutAttr : EnumAttr<Tile_Dialect, Tile_Layout, "layout"> {
  let assemblyFormat = "`<` $value `>`";
}

class Tile_Op<string mnemonic, list<Trait> traits = []> : Op<Tile_Dialect, mnemonic, traits>;

// A tile: a 1-D ranked tensor of the DSL's element types.
def Tile_Elem : AnyTypeOf<[I1, I8, I32, I64, F32, F8E4M3FN, F4E2M1FN]>;
def Tile_Tile : 1DTensorOf<[Tile_Elem]>;
def Tile_F32Tile : 1DTensorOf<[F32]>;
def Tile_Buffer : MemRefRankOf<[Tile_Elem], [1]>;
def Tile_Scalar : AnyTypeOf<[I1, I8, I32, I64, F32, F8E4M3FN, F4E2M1FN]>;

def Tile_ProgramIdOp : Tile_Op<"program_id", [Pure]> {
  let summary = "this program's id in the grid";
  let results = (outs I64:$result);
  let assemblyFormat = "attr-dict";
}

def Tile_IotaOp : Tile_Op<"iota", [Pure]> {
  let summary = "lanes 0, 1, ..., N - 1";
  let results = (outs 1DTensorOf<[I64]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Tile_ClampFOp : Tile_Op<"clampf", [Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "clamp to [-bound, bound], NaN kept";
  let arguments = (ins AnyTypeOf<[F32, Tile_F32Tile]>:$value, F64Attr:$bound);
  let results = (outs AnyTypeOf<[F32, Tile_F32Tile]>:$result);
  let assemblyFormat = "$value `,` $bound attr-dict `:` type($result)";
}

def Tile_ExtractOp : Tile_Op<"extract", [Pure]> {
  let summary = "lane `lane` of a tile";
  let arguments = (ins Tile_Tile:$tile, I64Attr:$lane);
  let results = (outs Tile_Scalar:$result);
  let assemblyFormat = "$tile `[` $lane `]` attr-dict `:` type($tile) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_ExtractAtOp : Tile_Op<"extract_at", [Pure]> {
  let summary = "lane `lane` (a value, uniform) of a tile";
  let arguments = (ins Tile_Tile:$tile, I64:$lane);
  let results = (outs Tile_Scalar:$result);
  let assemblyFormat = "$tile `[` $lane `]` attr-dict `:` type($tile) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_ShuffleOp : Tile_Op<"shuffle", [Pure]> {
  let summary = "lane i of the result: lane mask[i] of lhs ++ rhs";
  let arguments = (ins Tile_Tile:$lhs, Tile_Tile:$rhs, DenseI32ArrayAttr:$mask);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$lhs `,` $rhs $mask attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_ReduceAddOp : Tile_Op<"reduce_add", [Pure]> {
  let summary = "the sum of a tile's lanes";
  let arguments = (ins Tile_Tile:$tile);
  let results = (outs Tile_Scalar:$result);
  let assemblyFormat = "$tile attr-dict `:` type($tile) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_ReduceMaxOp : Tile_Op<"reduce_max", [Pure]> {
  let summary = "the largest of a tile's lanes (maxnum)";
  let arguments = (ins Tile_Tile:$tile);
  let results = (outs Tile_Scalar:$result);
  let assemblyFormat = "$tile attr-dict `:` type($tile) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_ReduceMaxGroupsOp : Tile_Op<"reduce_max_groups", [Pure]> {
  let summary = "lane g: the largest of consecutive group g of `groups` equal groups";
  let arguments = (ins Tile_F32Tile:$tile, I64Attr:$groups);
  let results = (outs Tile_F32Tile:$result);
  let assemblyFormat = "$tile `,` $groups attr-dict `:` type($tile) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_FoldMaxOp : Tile_Op<"fold_max", [Pure]> {
  let summary = "the larger of lanes i and i + pairs within each run of 2 x pairs lanes";
  let arguments = (ins Tile_F32Tile:$tile, I64Attr:$pairs);
  let results = (outs Tile_F32Tile:$result);
  let assemblyFormat = "$tile `,` $pairs attr-dict `:` type($tile) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_LoadOp : Tile_Op<"load"> {
  let summary = "element `offset` of a buffer";
  let arguments = (ins Arg<Tile_Buffer, "", [MemRead]>:$buffer, I64:$offset);
  let results = (outs Tile_Scalar:$result);
  let assemblyFormat = "$buffer `[` $offset `]` attr-dict `:` type($buffer) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_LoadTileOp : Tile_Op<"load_tile"> {
  let summary = "elements [offset, offset + N) of a buffer; `align`: bytes the address is known aligned to";
  let arguments = (ins Arg<Tile_Buffer, "", [MemRead]>:$buffer, I64:$offset,
                       DefaultValuedAttr<I32Attr, "0">:$align);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$buffer `[` $offset `]` attr-dict `:` type($buffer) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_LoadTileMaskedOp : Tile_Op<"load_tile_masked"> {
  let summary = "as load_tile, lanes at or past `limit` elements read as 0";
  let arguments = (ins Arg<Tile_Buffer, "", [MemRead]>:$buffer, I64:$offset, I64:$limit,
                       DefaultValuedAttr<I32Attr, "0">:$align);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$buffer `[` $offset `]` `,` $limit attr-dict `:` type($buffer) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_LoadGatherOp : Tile_Op<"load_gather"> {
  let summary = "lane i: element offsets[i] of a buffer where mask[i], else 0 (no memory touched)";
  let arguments = (ins Arg<Tile_Buffer, "", [MemRead]>:$buffer, 1DTensorOf<[I64]>:$offsets,
                       1DTensorOf<[I1]>:$mask);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$buffer `[` $offsets `]` `,` $mask attr-dict `:` type($buffer) `,` type($offsets) `,`"
                       " type($mask) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_LoadRowsOp : Tile_Op<"load_rows"> {
  let summary = "rows of W = lanes / R consecutive elements: lane r W + k is element starts[r] + k where k < counts[r], else 0 (no memory touched)";
  let arguments = (ins Arg<Tile_Buffer, "", [MemRead]>:$buffer, 1DTensorOf<[I64]>:$starts,
                       1DTensorOf<[I64]>:$counts, DefaultValuedAttr<I32Attr, "0">:$align);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$buffer `[` $starts `]` `,` $counts attr-dict `:` type($buffer) `,` type($starts) `,`"
                       " type($counts) `->` type($result)";
  let hasVerifier = 1;
}

// The order of a step's kernels (dsl/Builder.h): the GPU lowering's wait for the kernels launched
// before this one, and its release of the next; both touch all memory as far as passes can tell.
def Tile_GridAwaitOp : Tile_Op<"grid_await", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "loads after this see every store of the kernels launched before";
  let assemblyFormat = "attr-dict";
}

def Tile_GridReleaseOp : Tile_Op<"grid_release", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "the next kernel's programs may start once every program has passed here";
  let assemblyFormat = "attr-dict";
}

// dsl/Builder.h's programSync: the program's stores before it are seen by its loads after it,
// whichever of its threads made them (a workgroup barrier on GPUs).
def Tile_ProgramSyncOp : Tile_Op<"program_sync", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "the program's stores before this are seen by all its loads after it";
  let assemblyFormat = "attr-dict";
}

def Tile_StoreOp : Tile_Op<"store"> {
  let summary = "a scalar to element `offset` of a buffer";
  let arguments = (ins Tile_Scalar:$value, Arg<Tile_Buffer, "", [MemWrite]>:$buffer, I64:$offset);
  let assemblyFormat = "$value `,` $buffer `[` $offset `]` attr-dict `:` type($value) `,` type($buffer)";
  let hasVerifier = 1;
}

def Tile_StoreTileOp : Tile_Op<"store_tile"> {
  let summary = "a tile to elements [offset, offset + N) of a buffer; `align`: as load_tile's";
  let arguments = (ins Tile_Tile:$value, Arg<Tile_Buffer, "", [MemWrite]>:$buffer, I64:$offset,
                       DefaultValuedAttr<I32Attr, "0">:$align);
  let assemblyFormat = "$value `,` $buffer `[` $offset `]` attr-dict `:` type($value) `,` type($buffer)";
  let hasVerifier = 1;
}

def Tile_StoreScatterOp : Tile_Op<"store_scatter"> {
  let summary = "lane i to element offsets[i] of a buffer where mask[i]";
  let arguments = (ins Tile_Tile:$value, Arg<Tile_Buffer, "", [MemWrite]>:$buffer,
                       1DTensorOf<[I64]>:$offsets, 1DTensorOf<[I1]>:$mask);
  let assemblyFormat = "$value `,` $buffer `[` $offsets `]` `,` $mask attr-dict `:` type($value) `,` type($buffer)"
                       " `,` type($offsets) `,` type($mask)";
  let hasVerifier = 1;
}

def Tile_AtomicAddOp : Tile_Op<"atomic_add", [AllTypesMatch<["value", "result"]>]> {
  let summary = "adds to element `offset`; the old value. Ordered after the program's stores, before its loads";
  let arguments = (ins Arg<Tile_Buffer, "", [MemRead, MemWrite]>:$buffer, I64:$offset, AnyTypeOf<[I32, I64]>:$value);
  let results = (outs AnyTypeOf<[I32, I64]>:$result);
  let assemblyFormat = "$buffer `[` $offset `]` `,` $value attr-dict `:` type($buffer) `,` type($value)";
  let hasVerifier = 1;
}

def Tile_DecodeNvfp4Op : Tile_Op<"decode_nvfp4", [Pure]> {
  let summary = "SPEC §2: key byte e4m3_rn_satfinite(e2m1 * scale) of 2 x P nibbles, a scale per 16";
  let arguments = (ins 1DTensorOf<[I8]>:$packed, 1DTensorOf<[I8]>:$scales);
  let results = (outs 1DTensorOf<[F8E4M3FN]>:$result);
  let assemblyFormat = "$packed `,` $scales attr-dict `:` type($packed) `,` type($scales) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_DotOp : Tile_Op<"dot", [Pure]> {
  let summary = "sum over lanes of a x b, in f32";
  let arguments = (ins Tile_Tile:$lhs, Tile_Tile:$rhs);
  let results = (outs F32:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let hasVerifier = 1;
}

def Tile_DotTilesOp : Tile_Op<"dot_tiles", [Pure]> {
  let summary = "lane n * M + m: the f32 dot of row m of a and row n of b, rows of k lanes";
  let arguments = (ins Tile_Tile:$lhs, Tile_Tile:$rhs, I64Attr:$k);
  let results = (outs Tile_F32Tile:$result);
  let assemblyFormat = "$lhs `,` $rhs `,` $k attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_PackScoreKeyOp : Tile_Op<"pack_score_key", [Pure]> {
  let summary = "the top-k's ordered i64 key of (score, block id): SPEC §5's order as one compare";
  let arguments = (ins AnyTypeOf<[F32, Tile_F32Tile]>:$score, AnyTypeOf<[I64, 1DTensorOf<[I64]>]>:$block);
  let results = (outs AnyTypeOf<[I64, 1DTensorOf<[I64]>]>:$result);
  let assemblyFormat = "$score `,` $block attr-dict `:` type($score) `,` type($block) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_StageOp : Tile_Op<"stage", [Pure]> {
  let summary = "a staged loop's hand-over: its producer's values as its consumer reads them";
  let description = [{
    The body of an scf.for made by the DSL's stagedFor: the ops before it make a trip's values
    from the induction variable and values defined above the loop (no iteration value, no store,
    no region), the ops after it consume them. Its results are its operands. A target without
    producer warps drops it (one group, trip by trip); one with them may run the two parts on
    different warps, up to `stages` trips apart, the values handed over in a ring of buffers.
  }];
  let arguments = (ins Variadic<AnyType>:$values, I64Attr:$stages);
  let results = (outs Variadic<AnyType>:$results);
  let assemblyFormat = "$values attr-dict `:` type($values) `->` type($results)";
  let hasVerifier = 1;
}

def Tile_ConvertLayoutOp : Tile_Op<"convert_layout", [Pure]> {
  let summary = "the same lanes in another layout (the encoding of the result's type)";
  let description = [{
    Inserted by a target's layout pass where a tile made in one layout is used by ops that take
    another: today a dot_tiles whose keys are in mma.sync or wgmma fragment order and whose results
    are needed blocked. The GPU conversion converts the tile once for all its uses, through a
    workgroup buffer of its lanes.
  }];
  let arguments = (ins Tile_Tile:$tile);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$tile attr-dict `:` type($tile) `->` type($result)";
  let hasVerifier = 1;
}

#endif // M3IDX_TILE_OPS
