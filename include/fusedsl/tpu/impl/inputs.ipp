#pragma once
// Input values for an HLO module: .npy files and random values.
// The bodies of fusedsl/tpu/inputs.hpp's functions: included at the end of that header in
// header-only mode, compiled once into fusedsl::compiled otherwise (core/compiled_mode.hpp).

#include "fusedsl/tpu/inputs.hpp"

namespace fusedsl::tpu {

FUSEDSL_DECL value read_npy_value(const std::filesystem::path& path) {
  io::npy_array a;
  try {
    a = io::read_npy(path.string());
  } catch (const io::npy_error& e) {
    throw tpu_error(e.what());
  }
  hlo::element_type t = hlo::element_type::f32;
  switch (a.dtype) {
    case io::npy_dtype::b1: t = hlo::element_type::pred; break;
    case io::npy_dtype::i4: t = hlo::element_type::s32; break;
    case io::npy_dtype::i8: t = hlo::element_type::s64; break;
    case io::npy_dtype::f2: t = hlo::element_type::f16; break;
    case io::npy_dtype::f4: t = hlo::element_type::f32; break;
    case io::npy_dtype::f8: t = hlo::element_type::f64; break;
  }
  value v;
  v.shape = hlo::shape::array(t, a.shape);
  v.data = a.as_doubles();
  return v;
}

FUSEDSL_DECL void write_npy_f32(const std::filesystem::path& path, const value& v) {
  std::vector<float> f(v.data.begin(), v.data.end());
  try {
    io::write_npy<float>(path.string(), f, v.shape.dims);
  } catch (const io::npy_error& e) {
    throw tpu_error(e.what());
  }
}

FUSEDSL_DECL value to_value(const value& a, const hlo::shape& want, const std::string& what) {
  if (a.shape.dims != want.dims)
    throw tpu_error(what + ": expected " + hlo::to_short_string(want) + ", the file holds " +
                    hlo::to_short_string(a.shape));
  value v = value::zeros(want);
  for (std::size_t i = 0; i < a.data.size(); ++i) v.data[i] = hlo::round_to(want.type, a.data[i]);
  return v;
}

FUSEDSL_DECL std::vector<value> load_inputs(const hlo::module& m,
                                          const std::filesystem::path& path) {
  const auto& entry = m.entry_computation();
  const auto params = entry.parameters();
  std::vector<value> out;
  if (!std::filesystem::is_directory(path)) {
    if (params.size() != 1)
      throw tpu_error(path.string() + " is a file, but the module takes " +
                      std::to_string(params.size()) + " inputs: give a directory of .npy files");
    const auto& p = entry.instructions[params[0]];
    out.push_back(to_value(read_npy_value(path), p.shape, "input 0 (" + p.name + ")"));
    return out;
  }
  for (std::size_t n = 0; n < params.size(); ++n) {
    const auto& p = entry.instructions[params[n]];
    const std::vector<std::string> names = {p.name + ".npy", "param" + std::to_string(n) + ".npy",
                                            std::to_string(n) + ".npy"};
    bool found = false;
    for (const auto& nm : names)
      if (std::filesystem::exists(path / nm)) {
        out.push_back(to_value(read_npy_value(path / nm), p.shape,
                               "input " + std::to_string(n) + " (" + p.name + ") from " + nm));
        found = true;
        break;
      }
    if (!found)
      throw tpu_error("no file for input " + std::to_string(n) + " (" + p.name + ") in " +
                      path.string() + ": tried " + names[0] + ", " + names[1] + ", " + names[2]);
  }
  return out;
}

FUSEDSL_DECL std::vector<value> random_inputs(const hlo::module& m, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> small(0, 15);
  const auto& entry = m.entry_computation();
  std::vector<value> out;
  for (auto id : entry.parameters()) {
    const auto& s = entry.instructions[id].shape;
    if (s.is_tuple())
      throw tpu_error("input " + entry.instructions[id].name +
                      ": tuple-shaped inputs are not supported");
    value v = value::zeros(s);
    for (auto& x : v.data) {
      if (hlo::is_floating(s.type)) x = hlo::round_to(s.type, normal(rng));
      else if (s.type == hlo::element_type::pred) x = small(rng) & 1;
      else x = small(rng);
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace fusedsl::tpu
