#pragma once
// Inputs for running a module: .npy files (a minimal reader for the little-endian, C-order
// arrays numpy writes), looked up by parameter name or number, or random values from a seed.
// (When include/fusedsl/io/npy.hpp exists this reader can give way to it.)
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "fusedsl/hlo/ir.hpp"
#include "fusedsl/tpu/error.hpp"
#include "fusedsl/tpu/execute.hpp"

namespace fusedsl::tpu {

// An array read from a .npy file: its dims and its values as doubles.
struct npy_array {
  std::vector<std::int64_t> dims;
  std::vector<double> data;
};

inline npy_array read_npy(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw tpu_error("cannot open " + path.string());
  const std::string where = path.string() + ": ";
  char magic[8];
  if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw tpu_error(where + "not a .npy file");
  std::uint32_t header_len = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    f.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4];
    f.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (std::uint32_t(b[3]) << 24);
  }
  if (!f || header_len > (1u << 20)) throw tpu_error(where + "bad header length");
  std::string header(header_len, '\0');
  if (!f.read(header.data(), header_len)) throw tpu_error(where + "truncated header");
  auto field = [&](const std::string& key) {
    auto p = header.find("'" + key + "'");
    if (p == std::string::npos) throw tpu_error(where + "header has no '" + key + "'");
    p = header.find(':', p);
    return p + 1;
  };
  auto dp = header.find('\'', field("descr"));
  const std::string descr = header.substr(dp + 1, header.find('\'', dp + 1) - dp - 1);
  if (header.find("True", field("fortran_order")) < header.find(',', field("fortran_order")))
    throw tpu_error(where + "Fortran-order arrays are not supported");
  npy_array a;
  {
    auto sp = header.find('(', field("shape"));
    auto se = header.find(')', sp);
    std::string dims = header.substr(sp + 1, se - sp - 1);
    std::size_t i = 0;
    while (i < dims.size()) {
      while (i < dims.size() && (dims[i] == ' ' || dims[i] == ',')) ++i;
      if (i >= dims.size()) break;
      std::size_t j = i;
      while (j < dims.size() && dims[j] >= '0' && dims[j] <= '9') ++j;
      if (j == i) throw tpu_error(where + "bad shape '" + dims + "'");
      a.dims.push_back(std::stoll(dims.substr(i, j - i)));
      i = j;
    }
  }
  std::int64_t count = 1;
  for (auto d : a.dims) count *= d;
  auto read_all = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> buf(static_cast<std::size_t>(count));
    if (!f.read(reinterpret_cast<char*>(buf.data()), std::streamsize(buf.size() * sizeof(T))))
      throw tpu_error(where + "truncated data (" + std::to_string(count) + " values of " + descr +
                      " expected)");
    a.data.assign(buf.begin(), buf.end());
  };
  if (descr == "<f4") read_all(float{});
  else if (descr == "<f8") read_all(double{});
  else if (descr == "<i4") read_all(std::int32_t{});
  else if (descr == "<i8") read_all(std::int64_t{});
  else if (descr == "|b1" || descr == "|u1") read_all(std::uint8_t{});
  else throw tpu_error(where + "dtype '" + descr + "' is not supported (f4, f8, i4, i8, b1)");
  return a;
}

// Writes an array value as float32 .npy (version 1.0).
inline void write_npy_f32(const std::filesystem::path& path, const value& v) {
  std::string shape = "(";
  for (auto d : v.shape.dims) shape += std::to_string(d) + ",";
  if (v.shape.dims.size() > 1) shape.pop_back();
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) throw tpu_error("cannot write " + path.string());
  f.write("\x93NUMPY\x01\x00", 8);
  const auto n = std::uint16_t(header.size());
  const char len[2] = {char(n & 0xff), char(n >> 8)};
  f.write(len, 2);
  f.write(header.data(), std::streamsize(header.size()));
  for (double x : v.data) {
    const float y = float(x);
    f.write(reinterpret_cast<const char*>(&y), sizeof y);
  }
}

inline value to_value(const npy_array& a, const hlo::shape& want, const std::string& what) {
  std::int64_t count = 1;
  for (auto d : a.dims) count *= d;
  if (count != want.element_count() || (a.dims != want.dims && !(a.dims.empty() && want.dims.empty())))
    throw tpu_error(what + ": expected " + hlo::to_short_string(want) + ", the file holds " +
                    std::to_string(count) + " values of shape (" + [&] {
                      std::string s;
                      for (auto d : a.dims) s += std::to_string(d) + ",";
                      return s;
                    }() + ")");
  value v = value::zeros(want);
  for (std::size_t i = 0; i < a.data.size(); ++i) v.data[i] = hlo::round_to(want.type, a.data[i]);
  return v;
}

// Inputs from `path`: a directory holding <parameter name>.npy, param<N>.npy or <N>.npy for
// each entry parameter, or a single .npy file for a module with one parameter.
inline std::vector<value> load_inputs(const hlo::module& m, const std::filesystem::path& path) {
  const auto& entry = m.entry_computation();
  const auto params = entry.parameters();
  std::vector<value> out;
  if (!std::filesystem::is_directory(path)) {
    if (params.size() != 1)
      throw tpu_error(path.string() + " is a file, but the module takes " +
                      std::to_string(params.size()) + " inputs: give a directory of .npy files");
    const auto& p = entry.instructions[params[0]];
    out.push_back(to_value(read_npy(path), p.shape, "input 0 (" + p.name + ")"));
    return out;
  }
  for (std::size_t n = 0; n < params.size(); ++n) {
    const auto& p = entry.instructions[params[n]];
    const std::vector<std::string> names = {p.name + ".npy", "param" + std::to_string(n) + ".npy",
                                            std::to_string(n) + ".npy"};
    bool found = false;
    for (const auto& nm : names)
      if (std::filesystem::exists(path / nm)) {
        out.push_back(to_value(read_npy(path / nm), p.shape,
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

// Random inputs: floats ~ N(0, 1), integers uniform in [0, 16), preds fair coins.
inline std::vector<value> random_inputs(const hlo::module& m, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> small(0, 15);
  const auto& entry = m.entry_computation();
  std::vector<value> out;
  for (auto id : entry.parameters()) {
    const auto& s = entry.instructions[id].shape;
    if (s.is_tuple())
      throw tpu_error("input " + entry.instructions[id].name + ": tuple-shaped inputs are not supported");
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
