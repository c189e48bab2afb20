#pragma once
// Tensor storage (owning, 64-byte aligned) and non-owning views, with static shapes.
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <span>

#include "fusedsl/core/dtype.hpp"
#include "fusedsl/core/shape.hpp"

namespace fusedsl {

inline constexpr std::size_t tensor_alignment = 64;

struct aligned_free {
  void operator()(void* p) const { ::operator delete(p, std::align_val_t(tensor_alignment)); }
};

// Untyped 64-byte aligned buffer; one allocation at construction.
class aligned_buffer {
 public:
  aligned_buffer() = default;
  explicit aligned_buffer(std::size_t bytes)
      : bytes_(bytes),
        data_(bytes ? static_cast<std::byte*>(
                          ::operator new(round_up(bytes), std::align_val_t(tensor_alignment)))
                    : nullptr) {
    if (bytes) std::memset(data_.get(), 0, round_up(bytes));
  }
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::size_t size() const { return bytes_; }

 private:
  static std::size_t round_up(std::size_t b) {
    return (b + tensor_alignment - 1) / tensor_alignment * tensor_alignment;
  }
  std::size_t bytes_ = 0;
  std::unique_ptr<std::byte, aligned_free> data_;
};

// A non-owning view of contiguous row-major data with a run-time dtype and shape.
struct tensor_ref {
  void* data = nullptr;
  dtype type = dtype::f32;
  dims shape{};

  template <class T> T* as() const { return static_cast<T*>(data); }
  std::size_t bytes() const { return std::size_t(shape.size()) * std::size_t(size_of(type)); }
};

// A typed view with a static shape.
template <class T, std::int64_t... Ds>
class tensor_view {
 public:
  using value_type = T;
  using shape_type = shape<Ds...>;
  static constexpr dims static_shape = shape_type::value;

  constexpr tensor_view() = default;
  constexpr explicit tensor_view(T* p) : data_(p) {}

  T* data() const { return data_; }
  static constexpr std::int64_t size() { return shape_type::size; }
  std::span<T> span() const { return {data_, std::size_t(size())}; }
  template <class... I>
  T& operator()(I... idx) const {
    static_assert(sizeof...(I) == sizeof...(Ds), "tensor_view: wrong number of indices");
    std::int64_t off = 0, k = 0;
    ((off += std::int64_t(idx) * shape_type::strides[std::size_t(k++)]), ...);
    return data_[off];
  }
  T& operator[](std::int64_t i) const { return data_[i]; }
  operator tensor_ref() const {
    return {const_cast<std::remove_const_t<T>*>(data_), dtype_of<std::remove_const_t<T>>,
            static_shape};
  }

 private:
  T* data_ = nullptr;
};

// An owning tensor with a static shape: one 64-byte aligned allocation.
template <class T, std::int64_t... Ds>
class tensor {
 public:
  using value_type = T;
  using shape_type = shape<Ds...>;
  static constexpr dims static_shape = shape_type::value;

  tensor() : buf_(std::size_t(shape_type::size) * sizeof(T)) {}

  T* data() { return reinterpret_cast<T*>(buf_.data()); }
  const T* data() const { return reinterpret_cast<const T*>(buf_.data()); }
  static constexpr std::int64_t size() { return shape_type::size; }
  std::span<T> span() { return {data(), std::size_t(size())}; }
  std::span<const T> span() const { return {data(), std::size_t(size())}; }
  tensor_view<T, Ds...> view() { return tensor_view<T, Ds...>(data()); }
  template <class... I> T& operator()(I... idx) { return view()(idx...); }
  template <class... I>
  const T& operator()(I... idx) const {
    return const_cast<tensor&>(*this).view()(idx...);
  }
  T& operator[](std::int64_t i) { return data()[i]; }
  const T& operator[](std::int64_t i) const { return data()[i]; }
  operator tensor_ref() { return {data(), dtype_of<T>, static_shape}; }
  tensor_ref ref() const { return {const_cast<T*>(data()), dtype_of<T>, static_shape}; }

 private:
  aligned_buffer buf_;
};

// An owning tensor whose dtype and shape are known only at run time (outputs, loaded files).
class dynamic_tensor {
 public:
  dynamic_tensor() = default;
  dynamic_tensor(dtype t, dims s)
      : type_(t), shape_(s), buf_(std::size_t(s.size()) * std::size_t(size_of(t))) {}
  dtype type() const { return type_; }
  const dims& shape() const { return shape_; }
  template <class T> T* data() { return reinterpret_cast<T*>(buf_.data()); }
  template <class T> const T* data() const { return reinterpret_cast<const T*>(buf_.data()); }
  void* raw() { return buf_.data(); }
  tensor_ref ref() { return {buf_.data(), type_, shape_}; }

 private:
  dtype type_ = dtype::f32;
  dims shape_{};
  aligned_buffer buf_;
};

}  // namespace fusedsl
