#pragma once
// Deterministic random HLO modules for round-trip tests and fuzz seeds: every opcode the IR
// has, random shapes/types/layouts, constants with inf/-inf/nan, shardings, odd op_names,
// gathers with random dimension numbers, variadic reduces and input_output_alias entries.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fusedsl/hlo/builder.hpp"

namespace fusedsl::hlo::testing {

class random_module_generator {
 public:
  explicit random_module_generator(std::uint64_t seed) : rng_(seed) {}

  module generate(int instruction_count = 24) {
    module m;
    m.name = "random_" + std::to_string(counter_++);
    const element_type t = pick({element_type::f32, element_type::f32, element_type::bf16,
                                 element_type::f16, element_type::f64});
    computation add_fn = make_scalar_computation("sum", opcode::add, t);
    computation max_fn = make_scalar_computation("max", opcode::maximum, t);
    m.add_computation(add_fn);
    m.add_computation(max_fn);
    const computation argmax_fn = argmax_computation(t);
    m.add_computation(argmax_fn);

    // A small fused computation: exp(a) * b.
    const std::vector<std::int64_t> fdims = random_dims(1, 2);
    computation_builder fb("fused_" + std::to_string(uniform(0, 99)));
    auto fa = fb.add_parameter(shape::array(t, fdims), "p0");
    auto fbb = fb.add_parameter(shape::array(t, fdims), "p1");
    fb.add_binary(opcode::multiply, fb.add_unary(opcode::exponential, fa), fbb);
    computation fused = fb.build();
    m.add_computation(fused);

    computation_builder b("main");
    std::vector<instruction_id> vals;
    const int params = uniform(1, 3);
    for (int i = 0; i < params; ++i) {
      shape s = shape::array(t, random_dims(0, 3));
      if (s.rank() > 1 && coin())
        s.minor_to_major = shape::layout_of_rank(s.rank()),
        std::swap(s.minor_to_major[0], s.minor_to_major[1]);
      vals.push_back(b.add_parameter(s, random_name()));
    }
    vals.push_back(b.add_parameter(shape::array(t, fdims), "fusion input"));
    vals.push_back(b.add_constant(random_literal(t, random_dims(0, 2))));

    for (int i = 0; i < instruction_count; ++i) {
      instruction_id x =
          vals[static_cast<std::size_t>(uniform(0, static_cast<int>(vals.size()) - 1))];
      const shape sx = b.shape_of(x);
      if (sx.is_tuple()) continue;
      std::optional<instruction_id> y;
      switch (uniform(0, 21)) {
        case 0: {
          static constexpr opcode un[] = {opcode::abs,          opcode::negate,
                                          opcode::exponential,  opcode::log,
                                          opcode::sqrt,         opcode::rsqrt,
                                          opcode::tanh,         opcode::erf,
                                          opcode::logistic,     opcode::sign,
                                          opcode::floor,        opcode::ceil,
                                          opcode::cosine,       opcode::sine,
                                          opcode::copy,         opcode::exponential_minus_one,
                                          opcode::log_plus_one, opcode::round_nearest_even};
          if (is_floating(sx.type)) y = b.add_unary(un[uniform(0, std::size(un) - 1)], x);
          break;
        }
        case 1: {
          static constexpr opcode bin[] = {opcode::add,    opcode::subtract, opcode::multiply,
                                           opcode::divide, opcode::maximum,  opcode::minimum,
                                           opcode::power,  opcode::remainder};
          if (sx.type != element_type::pred)
            y = b.add_binary(bin[uniform(0, std::size(bin) - 1)], x, same_shape(b, vals, sx));
          break;
        }
        case 2: {
          auto p = b.add_compare(x, same_shape(b, vals, sx),
                                 static_cast<comparison_direction>(uniform(0, 5)));
          if (coin())
            p = b.add_binary(pick({opcode::and_, opcode::or_, opcode::xor_}), p,
                             b.add_unary(opcode::not_, p));
          y = b.add_select(p, x, same_shape(b, vals, sx));
          break;
        }
        case 3: {  // dot with an optional batch dim
          std::int64_t m0 = uniform(1, 4), k = uniform(1, 4), n = uniform(1, 4);
          bool batch = coin();
          std::vector<std::int64_t> ld = {m0, k}, rd = {k, n};
          if (batch) ld.insert(ld.begin(), 2), rd.insert(rd.begin(), 2);
          auto l = b.add_parameter(shape::array(t, ld), "lhs");
          auto r = b.add_constant(random_literal(t, rd));
          dot_dimension_numbers dn;
          dn.lhs_contracting = {batch ? 2 : 1};
          dn.rhs_contracting = {batch ? 1 : 0};
          if (batch) dn.lhs_batch = {0}, dn.rhs_batch = {0};
          y = b.add_dot(l, r, dn,
                        coin() ? std::optional<element_type>(element_type::f32) : std::nullopt);
          break;
        }
        case 4: {
          std::vector<std::int64_t> out = sx.dims, dims;
          for (std::size_t d = 0; d < sx.dims.size(); ++d)
            dims.push_back(static_cast<std::int64_t>(d));
          out.push_back(uniform(1, 3));
          y = b.add_broadcast(x, out, dims);
          break;
        }
        case 5:
          if (sx.rank() > 0 && sx.type == t) {
            auto init = b.add_constant(literal::scalar(t, coin() ? 0.0 : -INFINITY));
            y = b.add_reduce(x, init, {uniform(0, static_cast<int>(sx.rank()) - 1)},
                             coin() ? add_fn : max_fn);
          }
          break;
        case 6: {
          std::vector<std::int64_t> perm;
          for (std::int64_t d = sx.rank() - 1; d >= 0; --d) perm.push_back(d);
          y = b.add_transpose(x, perm);
          break;
        }
        case 7:
          y = b.add_reshape(x, {sx.element_count()});
          break;
        case 8: {
          std::vector<slice_dim> r;
          for (std::int64_t d : sx.dims) r.push_back({0, d, uniform(1, 2)});
          y = b.add_slice(x, r);
          break;
        }
        case 9:
          if (sx.rank() > 0)
            y = b.add_concatenate({x, x}, uniform(0, static_cast<int>(sx.rank()) - 1));
          break;
        case 10:
          y = b.add_convert(x, pick({element_type::f32, element_type::bf16, element_type::s32, t}));
          break;
        case 11:
          if (sx.rank() > 0)
            y = b.add_iota(shape::array(pick({element_type::s32, element_type::f32}), sx.dims), 0);
          break;
        case 12: {
          auto tup = b.add_tuple({x, vals[0]});
          y = b.add_get_tuple_element(tup, uniform(0, 1));
          break;
        }
        case 13: {
          auto a = b.add_parameter(shape::array(t, fdims), random_name());
          // kLoop: XLA:CPU only accepts kInput for reduction roots and kOutput for dot + add.
          y = b.add_fusion({a, vals[static_cast<std::size_t>(params)]}, fused, fusion_kind::loop);
          break;
        }
        case 14:
          y = b.add_call(
              {b.add_constant(literal::scalar(t, 1.5)), b.add_constant(literal::scalar(t, -2))},
              add_fn);
          break;
        case 15:
          y = b.add_constant(
              random_literal(pick({t, element_type::pred, element_type::s32, element_type::s64}),
                             random_dims(0, 3)));
          break;
        case 16:
          y = b.add_clamp(same_shape(b, vals, sx), x, same_shape(b, vals, sx));
          break;
        case 17:
          if (sx.rank() > 0 && sx.element_count() > 0) y = random_gather(b, x, sx);
          break;
        case 18:
          if (sx.rank() > 0) {
            std::vector<instruction_id> starts;
            std::vector<std::int64_t> sizes;
            const element_type it = pick({element_type::s32, element_type::s64});
            for (std::int64_t d : sx.dims) {
              starts.push_back(b.add_constant(literal::scalar_int(it, uniform(-2, 5))));
              sizes.push_back(uniform(0, static_cast<int>(d)));
            }
            y = b.add_dynamic_slice(x, starts, sizes);
          }
          break;
        case 19:
          if (sx.rank() > 0) {
            std::vector<instruction_id> starts;
            std::vector<std::int64_t> dims;
            for (std::int64_t d : sx.dims) {
              starts.push_back(
                  b.add_constant(literal::scalar_int(element_type::s32, uniform(-2, 5))));
              dims.push_back(uniform(std::min<int>(1, static_cast<int>(d)), static_cast<int>(d)));
            }
            y = b.add_dynamic_update_slice(x, b.add_constant(random_literal(sx.type, dims)),
                                           starts);
          }
          break;
        case 20:
          if (sx.rank() > 0 && sx.type == t) {  // jax's argmax: (value, iota) reduced together
            const std::int64_t d = uniform(0, static_cast<int>(sx.rank()) - 1);
            auto io = b.add_iota(shape::array(element_type::s32, sx.dims), d);
            auto r = b.add_reduce({x, io},
                                  {b.add_constant(literal::scalar(t, -INFINITY)),
                                   b.add_constant(literal::scalar_int(element_type::s32, 0))},
                                  {d}, argmax_fn);
            y = b.add_get_tuple_element(r, uniform(0, 1));
          }
          break;
        default:
          if (sx.rank() > 0) {
            auto s = b.add_unary(opcode::copy, x);
            b.set_sharding(s, random_sharding(sx.rank()));
            y = s;
          }
      }
      if (y) {
        if (uniform(0, 5) == 0) b.set_op_name(*y, random_name());
        vals.push_back(*y);
      }
    }
    std::vector<instruction_id> outs = {vals.back(), vals[vals.size() / 2]};
    auto root = coin() ? b.add_tuple(outs) : vals.back();
    m.set_entry(b.build(root));
    // Donate a parameter to an output of its shape, now and then (not under SPMD, where the
    // parameter's and the output's shardings would have to agree).
    const computation& e = m.entry_computation();
    bool sharded = false;
    for (const instruction& in : e.instructions) sharded |= in.sharding.has_value();
    const auto ps = e.parameters();
    const shape& rs = e.root_instruction().shape;
    std::vector<bool> donated(ps.size(), false);
    for (std::size_t k = 0; !sharded && rs.is_tuple() && k < rs.elements.size() && coin(); ++k)
      for (std::size_t p = 0; p < ps.size(); ++p)
        if (!donated[p] && e.instructions[ps[p]].shape.compatible(rs.elements[k]) &&
            !rs.elements[k].is_tuple()) {
          m.input_output_alias.push_back(
              {{static_cast<std::int64_t>(k)}, static_cast<std::int64_t>(p), {}, false});
          donated[p] = true;
          break;
        }
    return m;
  }

 private:
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  int uniform(int lo, std::size_t hi) { return uniform(lo, static_cast<int>(hi)); }
  bool coin() { return uniform(0, 1) == 1; }
  template <class T>
  T pick(std::initializer_list<T> xs) {
    return *(xs.begin() + uniform(0, static_cast<int>(xs.size()) - 1));
  }
  std::vector<std::int64_t> random_dims(int min_rank, int max_rank) {
    std::vector<std::int64_t> d(static_cast<std::size_t>(uniform(min_rank, max_rank)));
    for (auto& x : d) x = uniform(1, 4);
    return d;
  }
  std::string random_name() {
    static const std::string chars = "abcxyz_019.-/ \"\\\t\xc3\xa9[]%";
    std::string s;
    int n = uniform(0, 8);
    for (int i = 0; i < n; ++i)
      s += chars[static_cast<std::size_t>(uniform(0, static_cast<int>(chars.size()) - 1))];
    return s;
  }
  literal random_literal(element_type t, std::vector<std::int64_t> dims) {
    shape s = shape::array(t, std::move(dims));
    if (is_integral(t)) {
      std::vector<std::int64_t> v(static_cast<std::size_t>(s.element_count()));
      for (auto& x : v)
        x = coin() ? uniform(-1000, 1000) : (std::int64_t{1} << 40) * (t == element_type::s64) - 7;
      return literal::array_int(s, v);
    }
    std::vector<double> v(static_cast<std::size_t>(s.element_count()));
    for (auto& x : v) {
      switch (uniform(0, 6)) {
        case 0:
          x = INFINITY;
          break;
        case 1:
          x = -INFINITY;
          break;
        case 2:
          x = NAN;
          break;
        case 3:
          x = 0.0;
          break;
        default:
          x = std::normal_distribution<double>(0, 1e3)(rng_) * std::pow(10.0, uniform(-8, 3));
      }
      if (t == element_type::pred) x = coin();
    }
    return literal::array(s, v);
  }
  instruction_id same_shape(computation_builder& b, std::vector<instruction_id>& vals,
                            const shape& s) {
    for (instruction_id v : vals)
      if (b.shape_of(v).compatible(s) && coin()) return v;
    return b.add_constant(random_literal(s.type, s.dims));
  }
  // Every tiled sharding spans 8 devices, so a module compiles with num_partitions=8.
  sharding random_sharding(std::int64_t rank) {
    switch (uniform(0, 4)) {
      case 0:
        return sharding::replicated();
      case 1:
        return sharding::maximal(uniform(0, 7));
      case 2: {
        std::vector<std::int64_t> tiles(static_cast<std::size_t>(rank), 1);
        tiles[0] = 8;
        return sharding::tiled(tiles);
      }
      case 3: {
        std::vector<std::int64_t> tiles(static_cast<std::size_t>(rank), 1);
        tiles.back() = 2;
        tiles.push_back(4);
        return sharding::tiled_devices(tiles, {7, 6, 5, 4, 3, 2, 1, 0}, true);
      }
      default: {
        sharding s = sharding::tiled({8});
        s.tile_dims.assign(static_cast<std::size_t>(rank), 1);
        s.tile_dims[0] = 8;
        s.iota_dims = {2, 4};
        s.iota_perm = {1, 0};
        return s;
      }
    }
  }

  // (a, ia, b, ib) -> (max, its index): the larger value wins, a on ties.
  static computation argmax_computation(element_type t) {
    computation_builder c("argmax");
    auto a = c.add_parameter(shape::scalar(t), "a");
    auto ia = c.add_parameter(shape::scalar(element_type::s32), "ia");
    auto v = c.add_parameter(shape::scalar(t), "b");
    auto iv = c.add_parameter(shape::scalar(element_type::s32), "ib");
    auto ge = c.add_compare(a, v, comparison_direction::ge);
    c.add_tuple({c.add_select(ge, a, v), c.add_select(ge, ia, iv)});
    return c.build();
  }

  // A gather of x with random dimension numbers: index vectors of k entries naming k operand
  // dims, some of them collapsed, sometimes one batching dim, random (also out-of-range) starts.
  instruction_id random_gather(computation_builder& b, instruction_id x, const shape& sx) {
    const std::int64_t r = sx.rank();
    std::vector<std::int64_t> dims_left;
    for (std::int64_t d = 0; d < r; ++d) dims_left.push_back(d);
    std::shuffle(dims_left.begin(), dims_left.end(), rng_);
    gather_dimension_numbers dn;
    // One batching dim (operand dim dims_left.back()) when another dim is left to index.
    const bool batching = r > 1 && coin();
    std::int64_t batch_dim = -1;
    if (batching) {
      batch_dim = dims_left.back();
      dims_left.pop_back();
      dn.operand_batching_dims = {batch_dim};
    }
    const int k = uniform(1, static_cast<int>(dims_left.size()));
    dn.start_index_map.assign(dims_left.begin(), dims_left.begin() + k);
    std::vector<std::int64_t> slice_sizes(static_cast<std::size_t>(r), 1);
    for (std::int64_t d = 0; d < r; ++d) {
      const bool indexed = std::find(dn.start_index_map.begin(), dn.start_index_map.end(), d) !=
                           dn.start_index_map.end();
      if (d == batch_dim) continue;
      if (indexed && coin()) {
        dn.collapsed_slice_dims.push_back(d);
        continue;
      }
      slice_sizes[static_cast<std::size_t>(d)] =
          uniform(1, static_cast<int>(sx.dims[static_cast<std::size_t>(d)]));
    }
    std::sort(dn.collapsed_slice_dims.begin(), dn.collapsed_slice_dims.end());
    // Indices: batch dims (the batching one first when present), the index vector at a random
    // position or implicit (index_vector_dim == rank) when k == 1.
    std::vector<std::int64_t> idims;
    if (batching) idims.push_back(sx.dims[static_cast<std::size_t>(batch_dim)]);
    const int extra = uniform(0, 2);
    for (int i = 0; i < extra; ++i) idims.push_back(uniform(1, 3));
    const bool implicit = k == 1 && coin();
    dn.index_vector_dim = implicit ? static_cast<std::int64_t>(idims.size())
                                   : uniform(0, static_cast<int>(idims.size()));
    if (!implicit) idims.insert(idims.begin() + dn.index_vector_dim, k);
    if (batching) dn.start_indices_batching_dims = {dn.index_vector_dim == 0 && !implicit ? 1 : 0};
    const std::int64_t offsets =
        r - static_cast<std::int64_t>(dn.collapsed_slice_dims.size()) - (batching ? 1 : 0);
    const std::int64_t out_rank =
        offsets + static_cast<std::int64_t>(idims.size()) - (implicit ? 0 : 1);
    std::vector<std::int64_t> positions;
    for (std::int64_t d = 0; d < out_rank; ++d) positions.push_back(d);
    std::shuffle(positions.begin(), positions.end(), rng_);
    dn.offset_dims.assign(positions.begin(), positions.begin() + offsets);
    std::sort(dn.offset_dims.begin(), dn.offset_dims.end());
    shape is = shape::array(pick({element_type::s32, element_type::s64}), idims);
    std::vector<std::int64_t> starts(static_cast<std::size_t>(is.element_count()));
    for (auto& v : starts) v = uniform(-2, 6);
    auto indices = b.add_constant(literal::array_int(is, starts));
    return b.add_gather(x, indices, dn, slice_sizes, coin());
  }

  std::mt19937_64 rng_;
  int counter_ = 0;
};

}  // namespace fusedsl::hlo::testing
