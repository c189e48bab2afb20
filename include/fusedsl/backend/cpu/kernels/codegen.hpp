#pragma once
// Kernels generated from the lowering's descriptors (plan/lower.hpp). A descriptor's code (plan/
// code.hpp) is a compile-time value; `machine` (gen/machine.hpp) unrolls a range of it into one
// straight-line body over xsimd batches (registers), instantiated once per fusion group, and the
// drivers in gen/, one file per kernel kind, run that body over the group's iteration space:
//
//   run_loop        loop groups: per segment, the outer axes in rows, the innermost axis in
//                   vectors, over the space plan/loop_space.hpp simplifies
//   run_reduce      reduce groups: vectors along the reduced axis (then across lanes) or along
//                   an output axis (each lane its own sum)
//   run_row         row groups: the prologue into a per-thread tile (or the operand in place),
//                   the row kernel (row.hpp), the epilogue on the way out
//   gemm_epilogue   a GEMM epilogue functor (gemm.hpp's form) over the output tile
//   score_mod       attention's score modifier (attention.hpp's form)
//   run_update      dynamic update slices
//
// A Desc type names its descriptor as `static constexpr const plan::kernel_desc& value` (and the
// program's node table as `nodes`). Values
// are carried in f32 registers; a load converts from the buffer's dtype, an op's result is
// rounded to its dtype (bf16, f16; integer division truncates), a store converts to the
// destination's. Integers are exact below 2^24.
// Every element is computed by one thread in a fixed order, so results do not depend on the
// thread count.
#include "fusedsl/backend/cpu/kernels/gen/epilogue.hpp"
#include "fusedsl/backend/cpu/kernels/gen/loop.hpp"
#include "fusedsl/backend/cpu/kernels/gen/machine.hpp"
#include "fusedsl/backend/cpu/kernels/gen/reduce.hpp"
#include "fusedsl/backend/cpu/kernels/gen/row.hpp"
#include "fusedsl/backend/cpu/kernels/gen/update.hpp"
