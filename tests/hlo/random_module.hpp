#pragma once
// Deterministic random HLO modules for round-trip tests and fuzz seeds: every opcode the IR
// has, random shapes/types/layouts, constants with inf/-inf/nan, shardings, odd op_names.

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
      switch (uniform(0, 17)) {
        case 0: {
          static constexpr opcode un[] = {opcode::abs,         opcode::negate,
                                          opcode::exponential, opcode::log,
                                          opcode::sqrt,        opcode::rsqrt,
                                          opcode::tanh,        opcode::erf,
                                          opcode::logistic,    opcode::sign,
                                          opcode::floor,       opcode::ceil,
                                          opcode::cosine,      opcode::sine,
                                          opcode::copy,        opcode::exponential_minus_one,
                                          opcode::log_plus_one};
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

  std::mt19937_64 rng_;
  int counter_ = 0;
};

}  // namespace fusedsl::hlo::testing
