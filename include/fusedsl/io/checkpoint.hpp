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
// its dtype in the file is copied the same way. An i8 parameter <name> that has an f32 parameter
// <name>_scale shaped [rows, 1] or [1, cols] (an int8 linear weight: nn::emit_linear) takes a
// F32, F16 or BF16 tensor <name> quantized at load, per channel along the axis the scale's shape
// says (quantize_s8_per_channel); a checkpoint that holds the I8 values and their scales binds
// them as stored.
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
#include "fusedsl/core/quantize.hpp"
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

// The index of the scales of i8 parameter p ("<name>_scale", f32, [rows, 1] or [1, cols]), or -1.
inline long scale_param(std::span<const checkpoint_param> params, std::size_t p) {
  const checkpoint_param& w = params[p];
  if (w.type != dtype::i8 || w.shape.rank != 2) return -1;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const checkpoint_param& s = params[i];
    if (s.name != w.name + "_scale" || s.type != dtype::f32 || s.shape.rank != 2) continue;
    if ((s.shape[0] == w.shape[0] && s.shape[1] == 1) ||
        (s.shape[0] == 1 && s.shape[1] == w.shape[1]))
      return long(i);
  }
  return -1;
}

// Floating tensor v quantized per channel into an i8 tensor and its f32 scales (shaped `scale`).
inline void quantize_copy(const safetensors_view& v, const checkpoint_param& w,
                          const checkpoint_param& scale, dynamic_tensor& values,
                          dynamic_tensor& scales) {
  const dynamic_tensor f = converted_copy(v, dtype::f32, w.shape);
  const std::size_t n = std::size_t(w.shape.size());
  const int axis = scale.shape[1] == 1 && w.shape[1] != 1 ? 0 : 1;
  const s8_weight q = quantize_s8_per_channel(std::span<const float>(f.data<float>(), n),
                                              w.shape[0], w.shape[1], axis, w.name);
  values = dynamic_tensor(dtype::i8, w.shape);
  scales = dynamic_tensor(dtype::f32, scale.shape);
  if (n) std::memcpy(values.raw(), q.values.data(), n);
  std::memcpy(scales.raw(), q.scales.data(), q.scales.size() * sizeof(float));
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
  std::vector<char> quantized(params.size(), 0);  // i8 values quantized at load from floats
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
    quantized[p] = options.convert && detail::is_float_storage(tensors[t].dtype) &&
                   detail::scale_param(params, p) >= 0;
    const bool convertible =
        (options.convert && is_floating(want.type) && detail::is_float_storage(tensors[t].dtype)) ||
        quantized[p];
    if (!shape_ok || !(same_type || convertible)) {
      std::string why = label + ": the program declares " + std::string(name_of(want.type)) +
                        to_string(want.shape) + ", the checkpoint has " +
                        std::string(name_of(tensors[t].dtype)) +
                        detail::shape_text(tensors[t].shape);
      if (shape_ok)
        why += options.convert ? " (only F32, F16 and BF16 convert: to a floating dtype, or to "
                                 "an i8 weight with its _scale parameter)"
                               : " (conversion is off)";
      mismatched.push_back(why);
    }
  }
  // The scales of a weight quantized at load come from it, not from the file.
  for (std::size_t p = 0; p < params.size(); ++p) {
    if (!quantized[p]) continue;
    const long sp = detail::scale_param(params, p);
    if (source[std::size_t(sp)] >= 0)
      mismatched.push_back("'" + params[std::size_t(sp)].name + "' is in the checkpoint, but '" +
                           params[p].name +
                           "' is not I8: its scales are made when it is quantized");
    else
      source[std::size_t(sp)] = -2;
  }
  for (std::size_t p = 0; p < params.size(); ++p)
    if (source[p] == -1)
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
  out.storage.reserve(params.size() + 1);
  for (std::size_t p = 0; p < params.size(); ++p) {
    if (source[p] == -2) continue;  // scales bound with their weight
    const safetensors_tensor& t = tensors[std::size_t(source[p])];
    const safetensors_view v = file.view(t.name);
    const checkpoint_param& want = params[p];
    if (quantized[p]) {
      const checkpoint_param& sc = params[std::size_t(detail::scale_param(params, p))];
      dynamic_tensor values, scales;
      detail::quantize_copy(v, want, sc, values, scales);
      out.storage.push_back(std::move(values));
      bind(want.name, out.storage.back().ref());
      out.storage.push_back(std::move(scales));
      bind(sc.name, out.storage.back().ref());
      out.converted.push_back(want.name + " (" + std::string(name_of(t.dtype)) +
                              " -> i8 per channel)");
      out.bound.push_back(want.name);
      out.bound.push_back(sc.name);
      continue;
    }
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
