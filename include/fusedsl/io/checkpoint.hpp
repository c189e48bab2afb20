#pragma once
// bind_checkpoint: binds every parameter of a program to the tensor of the same name in a
// safetensors checkpoint, in one call.
//
//   const io::safetensors_file file = io::safetensors_file::open(dir / "model.safetensors");
//   io::checkpoint_binding bound = io::bind_checkpoint(executor, file,
//                                                      {.rename = models::bert_checkpoint_name,
//                                                      .convert = true});
//
// The program's parameters are matched by name (after `rename`, which maps the checkpoint's names
// to the program's, or drops a tensor the program does not use: it is then listed as ignored).
// Before anything is bound, every problem is collected into one checkpoint_error that names each
// tensor at fault: parameters the file lacks, tensors the program has no parameter for, shapes
// that differ (both shapes given), dtypes that cannot be converted, two tensors for one
// parameter. A tensor stored in the declared dtype is bound as it lies in the file (no copy; the
// file must outlive the executor's calls); F32, F16 and BF16 tensors of another floating dtype
// are converted (widening is exact, narrowing rounds to nearest even) into storage the returned
// checkpoint_binding owns, which must live as long too. A tensor whose bytes are not aligned for
// its dtype in the file is copied the same way.
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/core/dtype.hpp"
#include "fusedsl/core/error.hpp"
#include "fusedsl/core/tensor.hpp"
#include "fusedsl/graph/node.hpp"
#include "fusedsl/io/safetensors.hpp"

namespace fusedsl::io {

// The checkpoint does not fit the program: what() lists every problem, one per line.
struct checkpoint_error : binding_error {
  using binding_error::binding_error;
};

struct checkpoint_options {
  // The program's name for a checkpoint tensor, or nullopt when the program does not use it.
  // Empty: names are used as they are.
  std::function<std::optional<std::string>(std::string_view)> rename;
  // Convert F32, F16 and BF16 tensors to the floating dtype the program declares; false: a dtype
  // that differs is an error.
  bool convert = true;
};

// A parameter a program declares.
struct checkpoint_param {
  std::string name;
  dtype type = dtype::f32;
  dims shape{};
};

// What bind_checkpoint did. Owns the converted copies: keep it alive while the program runs.
struct checkpoint_binding {
  std::vector<std::string> bound;      // the program's names, in the order bound
  std::vector<std::string> converted;  // "name (F16 -> f32)": bound from a converted copy
  std::vector<std::string> ignored;    // checkpoint names the program does not use
  std::vector<dynamic_tensor> storage;
};

namespace detail {

inline std::string shape_text(std::span<const std::int64_t> s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

inline bool same_shape(std::span<const std::int64_t> s, const dims& d) {
  if (std::int64_t(s.size()) != d.rank) return false;
  for (int i = 0; i < d.rank; ++i)
    if (s[std::size_t(i)] != d[i]) return false;
  return true;
}

constexpr bool is_float_storage(safetensors_dtype t) {
  return t == safetensors_dtype::f32 || t == safetensors_dtype::f16 || t == safetensors_dtype::bf16;
}

// Element i of a F32/F16/BF16 tensor as float (exact).
inline float load_float(safetensors_dtype t, const std::byte* p, std::size_t i) {
  std::uint16_t h = 0;
  switch (t) {
    case safetensors_dtype::f32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case safetensors_dtype::f16:
      std::memcpy(&h, p + 2 * i, 2);
      return f16::to_float(h);
    default:
      std::memcpy(&h, p + 2 * i, 2);
      return static_cast<float>(bf16::from_bits(h));
  }
}

// The tensor's bytes in `to` (a floating dtype), converted where the dtypes differ.
inline dynamic_tensor converted_copy(const safetensors_view& v, dtype to, const dims& shape) {
  dynamic_tensor t(to, shape);
  const std::size_t n = v.element_count();
  if (to_dtype(v.dtype) == to) {
    if (n) std::memcpy(t.raw(), v.bytes.data(), v.bytes.size());
    return t;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const float x = load_float(v.dtype, v.bytes.data(), i);
    switch (to) {
      case dtype::f32:
        t.data<float>()[i] = x;
        break;
      case dtype::bf16:
        t.data<std::uint16_t>()[i] = bf16::from_float(x);
        break;
      case dtype::f16:
        t.data<std::uint16_t>()[i] = f16::from_float(x);
        break;
      default:
        break;
    }
  }
  return t;
}

}  // namespace detail

// Binds every parameter in `params` through bind(name, tensor) from `file`, or throws one
// checkpoint_error listing every problem (and binds nothing).
inline checkpoint_binding bind_checkpoint(
    std::span<const checkpoint_param> params, const safetensors_file& file,
    const std::function<void(const std::string&, tensor_ref)>& bind,
    const checkpoint_options& options = {}) {
  checkpoint_binding out;
  std::vector<std::string> missing, unexpected, mismatched;
  // The checkpoint tensor each parameter takes (index into file.tensors()).
  std::vector<long> source(params.size(), -1);
  const std::span<const safetensors_tensor> tensors = file.tensors();
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const std::string& stored = tensors[t].name;
    std::optional<std::string> name =
        options.rename ? options.rename(stored) : std::optional<std::string>(stored);
    if (!name) {
      out.ignored.push_back(stored);
      continue;
    }
    std::size_t p = 0;
    while (p < params.size() && params[p].name != *name) ++p;
    const std::string label =
        *name == stored ? "'" + stored + "'" : "'" + stored + "' (as '" + *name + "')";
    if (p == params.size()) {
      unexpected.push_back(label + " " + std::string(name_of(tensors[t].dtype)) +
                           detail::shape_text(tensors[t].shape));
      continue;
    }
    if (source[p] >= 0) {
      mismatched.push_back("'" + *name + "' is given twice: by '" +
                           tensors[std::size_t(source[p])].name + "' and by '" + stored + "'");
      continue;
    }
    source[p] = long(t);
    const checkpoint_param& want = params[p];
    const bool shape_ok = detail::same_shape(tensors[t].shape, want.shape);
    const bool same_type = to_dtype(tensors[t].dtype) == want.type;
    const bool convertible =
        options.convert && is_floating(want.type) && detail::is_float_storage(tensors[t].dtype);
    if (!shape_ok || !(same_type || convertible)) {
      std::string why = label + ": the program declares " + std::string(name_of(want.type)) +
                        to_string(want.shape) + ", the checkpoint has " +
                        std::string(name_of(tensors[t].dtype)) +
                        detail::shape_text(tensors[t].shape);
      if (shape_ok)
        why += options.convert ? " (only F32, F16 and BF16 convert, to a floating dtype)"
                               : " (conversion is off)";
      mismatched.push_back(why);
    }
  }
  for (std::size_t p = 0; p < params.size(); ++p)
    if (source[p] < 0)
      missing.push_back("'" + params[p].name + "' " + std::string(name_of(params[p].type)) +
                        to_string(params[p].shape));
  const std::size_t problems = missing.size() + unexpected.size() + mismatched.size();
  if (problems) {
    std::string msg = "bind_checkpoint: " + file.label() + " does not fit the program (" +
                      std::to_string(problems) + (problems == 1 ? " problem" : " problems") + "):";
    for (const std::string& m : missing) msg += "\n  missing: " + m;
    for (const std::string& m : unexpected) msg += "\n  unexpected: " + m;
    for (const std::string& m : mismatched) msg += "\n  mismatched: " + m;
    if (!out.ignored.empty()) {
      msg += "\n  (ignored, as the program does not use them:";
      for (const std::string& m : out.ignored) msg += " '" + m + "'";
      msg += ")";
    }
    throw checkpoint_error(msg);
  }
  out.storage.reserve(params.size());
  for (std::size_t p = 0; p < params.size(); ++p) {
    const safetensors_tensor& t = tensors[std::size_t(source[p])];
    const safetensors_view v = file.view(t.name);
    const checkpoint_param& want = params[p];
    const bool aligned =
        reinterpret_cast<std::uintptr_t>(v.bytes.data()) % std::uintptr_t(size_of(want.type)) == 0;
    if (to_dtype(t.dtype) == want.type && aligned) {
      bind(want.name, tensor_ref{const_cast<std::byte*>(v.bytes.data()), want.type, want.shape});
    } else {
      out.storage.push_back(detail::converted_copy(v, want.type, want.shape));
      bind(want.name, out.storage.back().ref());
      if (to_dtype(t.dtype) != want.type)
        out.converted.push_back(want.name + " (" + std::string(name_of(t.dtype)) + " -> " +
                                std::string(name_of(want.type)) + ")");
    }
    out.bound.push_back(want.name);
  }
  return out;
}

// The same for an executor: its parameters are those its bindings() list as params; each is
// bound with executor.bind(name, tensor).
template <class Executor>
requires requires(Executor& e, tensor_ref t) {
  e.bindings();
  e.bind(std::string_view{}, t);
}
checkpoint_binding bind_checkpoint(Executor& executor, const safetensors_file& file,
                                   const checkpoint_options& options = {}) {
  std::vector<checkpoint_param> params;
  for (const auto& b : executor.bindings())
    if (b.kind == graph::op_kind::param) params.push_back({b.name, b.type, b.shape});
  return bind_checkpoint(
      params, file, [&](const std::string& name, tensor_ref t) { executor.bind(name, t); },
      options);
}

}  // namespace fusedsl::io
