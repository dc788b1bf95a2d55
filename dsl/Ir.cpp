#include "dsl/Ir.h"

#include <fmt/format.h>

namespace m3idx::dsl {

const char *opName(OpKind k) {
  switch (k) {
  case OpKind::ConstInt: return "const";
  case OpKind::ConstFloat: return "constf";
  case OpKind::ScalarArg: return "arg";
  case OpKind::ProgramId: return "program_id";
  case OpKind::Iota: return "iota";
  case OpKind::Add: return "add";
  case OpKind::Sub: return "sub";
  case OpKind::Mul: return "mul";
  case OpKind::DivS: return "divs";
  case OpKind::RemS: return "rems";
  case OpKind::MinS: return "mins";
  case OpKind::MaxS: return "maxs";
  case OpKind::MaxNumF: return "maxnumf";
  case OpKind::And: return "and";
  case OpKind::Or: return "or";
  case OpKind::Xor: return "xor";
  case OpKind::Shl: return "shl";
  case OpKind::ShrU: return "shru";
  case OpKind::CmpEq: return "cmp.eq";
  case OpKind::CmpNe: return "cmp.ne";
  case OpKind::CmpLtS: return "cmp.lts";
  case OpKind::CmpLeS: return "cmp.les";
  case OpKind::CmpGtS: return "cmp.gts";
  case OpKind::CmpGeS: return "cmp.ges";
  case OpKind::CmpGtU: return "cmp.gtu";
  case OpKind::CmpUnordF: return "cmpf.uno";
  case OpKind::CmpEqF: return "cmpf.oeq";
  case OpKind::Select: return "select";
  case OpKind::ExtS: return "exts";
  case OpKind::ExtU: return "extu";
  case OpKind::Trunc: return "trunc";
  case OpKind::SIToFP: return "sitofp";
  case OpKind::ExtF: return "extf";
  case OpKind::TruncF: return "truncf";
  case OpKind::Bitcast: return "bitcast";
  case OpKind::ClampF: return "clampf";
  case OpKind::Splat: return "splat";
  case OpKind::Extract: return "extract";
  case OpKind::ExtractAt: return "extract.at";
  case OpKind::Shuffle: return "shuffle";
  case OpKind::ReduceAdd: return "reduce.add";
  case OpKind::ReduceMax: return "reduce.max";
  case OpKind::ReduceMaxGroups: return "reduce.max.groups";
  case OpKind::FoldMax: return "fold.max";
  case OpKind::Load: return "load";
  case OpKind::LoadTile: return "load.tile";
  case OpKind::LoadTileMasked: return "load.tile.masked";
  case OpKind::LoadGather: return "load.gather";
  case OpKind::LoadRows: return "load.rows";
  case OpKind::Store: return "store";
  case OpKind::StoreTile: return "store.tile";
  case OpKind::StoreScatter: return "store.scatter";
  case OpKind::AtomicAdd: return "atomic.add";
  case OpKind::GridAwait: return "grid.await";
  case OpKind::GridRelease: return "grid.release";
  case OpKind::ProgramSync: return "program.sync";
  case OpKind::DecodeNvfp4: return "nvfp4.decode";
  case OpKind::Dot: return "dot";
  case OpKind::DotTiles: return "dot.tiles";
  case OpKind::PackScoreKey: return "topk.pack_key";
  case OpKind::For: return "for";
  case OpKind::If: return "if";
  case OpKind::Yield: return "yield";
  case OpKind::Stage: return "stage";
  }
  return "?";
}

namespace {

std::string name(ValueId v) { return fmt::format("%{}", v.id); }

std::string list(const std::vector<ValueId> &vs) {
  std::string s;
  for (size_t i = 0; i < vs.size(); ++i)
    s += (i ? ", " : "") + name(vs[i]);
  return s;
}

using Note = std::function<std::string(const Op &)>;

void printRegion(const Kernel &k, const Region &r, int indent, std::string &out, const Note &note);

void printOp(const Kernel &k, const Op &op, int indent, std::string &out, const Note &note) {
  std::string pad(indent, ' ');
  std::string lhs = op.results.empty() ? "" : list(op.results) + " = ";
  std::string attrs;
  switch (op.kind) {
  case OpKind::ConstInt: attrs = fmt::format(" {}", op.intAttr); break;
  case OpKind::ConstFloat: attrs = fmt::format(" {:a}", op.floatAttr); break;
  case OpKind::ScalarArg: attrs = fmt::format(" {}", k.scalars[op.intAttr].name); break;
  case OpKind::Extract: attrs = fmt::format(" [{}]", op.intAttr); break;
  case OpKind::ClampF: attrs = fmt::format(" {:a}", op.floatAttr); break;
  case OpKind::Shuffle: attrs = fmt::format(" [{}]", fmt::join(op.lanesAttr, ", ")); break;
  case OpKind::DotTiles: attrs = fmt::format(" k={}", op.intAttr); break;
  case OpKind::ReduceMaxGroups: attrs = fmt::format(" groups={}", op.intAttr); break;
  case OpKind::FoldMax: attrs = fmt::format(" pairs={}", op.intAttr); break;
  case OpKind::Stage: attrs = fmt::format(" stages={}", op.intAttr); break;
  case OpKind::For:
    if (op.intAttr > 1)
      attrs = fmt::format(" unroll={}", op.intAttr);
    break;
  case OpKind::Load: case OpKind::LoadTile: case OpKind::LoadTileMasked: case OpKind::LoadGather:
  case OpKind::LoadRows:
  case OpKind::Store: case OpKind::StoreTile: case OpKind::StoreScatter: case OpKind::AtomicAdd:
    attrs = fmt::format(" @{}", k.buffers[op.intAttr].name);
    if (op.alignAttr)
      attrs += fmt::format(" align={}", op.alignAttr);
    break;
  default: break;
  }
  std::string types;
  for (size_t i = 0; i < op.results.size(); ++i)
    types += (i ? ", " : " : ") + k.typeOf(op.results[i]).str();
  out += fmt::format("{}{}{}{}{}{}{}", pad, lhs, opName(op.kind), attrs,
                     op.operands.empty() ? "" : " ", list(op.operands), types);
  if (op.kind == OpKind::For) {
    out += fmt::format(" iv {} iter ({})", name(op.regions[0].args[0]),
                       list(std::vector<ValueId>(op.regions[0].args.begin() + 1,
                                                 op.regions[0].args.end())));
  }
  const std::string noted = note ? note(op) : "";
  if (op.regions.empty()) {
    out += noted.empty() ? "\n" : "  // " + noted + "\n";
    return;
  }
  out += noted.empty() ? " {\n" : " {  // " + noted + "\n";
  for (size_t r = 0; r < op.regions.size(); ++r) {
    if (r)
      out += pad + "} else {\n";
    printRegion(k, op.regions[r], indent + 2, out, note);
  }
  out += pad + "}\n";
}

void printRegion(const Kernel &k, const Region &r, int indent, std::string &out, const Note &note) {
  for (int32_t i : r.ops)
    printOp(k, k.ops[i], indent, out, note);
}

} // namespace

std::string Kernel::print() const { return print(nullptr); }

std::string Kernel::print(const std::function<std::string(const Op &)> &note) const {
  std::string out = fmt::format("kernel @{}(", name);
  std::vector<std::string> args;
  for (const BufferArg &b : buffers)
    args.push_back(fmt::format("{}: buffer<{}> {}", b.name, elemName(b.elem),
                               b.access == Access::Read    ? "read"
                               : b.access == Access::Write ? "write"
                                                           : "read_write"));
  for (const ScalarArgDecl &s : scalars)
    args.push_back(fmt::format("{}: {}", s.name, elemName(s.elem)));
  out += fmt::format("{}){} {{\n", fmt::join(args, ", "), warps > 1 ? fmt::format(" warps={}", warps) : "");
  printRegion(*this, body, 2, out, note);
  out += "}\n";
  return out;
}

} // namespace m3idx::dsl
