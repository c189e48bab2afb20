#pragma once
// Inputs for running a module: .npy files (read with io/npy.hpp) looked up by parameter name or
// number, or random values from a seed.
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "fusedsl/core/compiled_mode.hpp"
#include "fusedsl/hlo/ir.hpp"
#include "fusedsl/io/npy.hpp"
#include "fusedsl/tpu/error.hpp"
#include "fusedsl/tpu/execute.hpp"

namespace fusedsl::tpu {

// A .npy file as a value: its dims, its element type (f4 -> f32, f8 -> f64, i4 -> s32, i8 -> s64,
// b1 -> pred, f2 -> f16) and its elements as doubles. Errors name the file.
FUSEDSL_DECL value read_npy_value(const std::filesystem::path& path);

// Writes an array value as a float32 .npy file.
FUSEDSL_DECL void write_npy_f32(const std::filesystem::path& path, const value& v);

FUSEDSL_DECL value to_value(const value& a, const hlo::shape& want, const std::string& what);

// Inputs from `path`: a directory holding <parameter name>.npy, param<N>.npy or <N>.npy for
// each entry parameter, or a single .npy file for a module with one parameter.
FUSEDSL_DECL std::vector<value> load_inputs(const hlo::module& m,
                                          const std::filesystem::path& path);

// Random inputs: floats ~ N(0, 1), integers uniform in [0, 16), preds fair coins.
FUSEDSL_DECL std::vector<value> random_inputs(const hlo::module& m, std::uint64_t seed);

}  // namespace fusedsl::tpu

#if FUSEDSL_HEADER_ONLY
#include "fusedsl/tpu/impl/inputs.ipp"
#endif
