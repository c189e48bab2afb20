#pragma once
// The comparison every numeric test makes of computed values with a reference.
//
//   CHECK(ft::compare(got, want, ft::rel_tol(1e-5)));          // element by element
//   CHECK(ft::compare(got, want, ft::allclose(1e-6, 1e-5)));    // numpy.allclose's rule
//   CHECK(ft::compare(got, want, ft::abs_tol(1e-3), ft::nans::expected));
//   CHECK(ft::compare_scaled(got, want, scale, 1e-5));          // |got - want| <= 1e-5 scale[i]
//   CHECK(ft::compare_rel_l2(got, want, 1e-2));                 // ||got - want|| / ||want||
//
// Rules, per element (want = reference, got = computed):
//   want finite: got must be finite and |got - want| <= the tolerance (a NaN or an inf fails);
//   want +-inf:  got must be the same infinity;
//   want NaN:    fails unless the test passes nans::expected, and then got must be NaN.
// A `comparison` converts to bool (true: every element passes) and prints the number of failing
// elements, the worst one (index, got, want, |got - want|, allowed) and the tolerance, which
// doctest's CHECK shows on failure. The worst element is the one with the largest
// |got - want| / allowed; a non-finite mismatch is worse than any finite one.
// Plain C++ (no doctest), so host code compiled by nvcc includes it too.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>

namespace fusedsl::test {

// Allowed |got - want| for a finite want: atol + rtol * max(|want|, floor).
struct tolerance {
  double atol = 0, rtol = 0, floor = 0;
  double allowed(double want) const { return atol + rtol * std::max(std::fabs(want), floor); }
};

// |got - want| <= a.
constexpr tolerance abs_tol(double a) {
  return {a, 0, 0};
}
// |got - want| <= r * max(|want|, floor): relative, and absolute below |want| = floor.
constexpr tolerance rel_tol(double r, double floor = 1.0) {
  return {0, r, floor};
}
// |got - want| <= atol + rtol * |want| (numpy.allclose).
constexpr tolerance allclose(double atol, double rtol) {
  return {atol, rtol, 0};
}
// got == want.
constexpr tolerance exact() {
  return {};
}

// Whether NaN in the reference is what the test means (then got must be NaN there too).
enum class nans { unexpected, expected };

struct comparison {
  static constexpr std::size_t none = std::size_t(-1);
  std::size_t count = 0;     // elements compared
  std::size_t failures = 0;  // elements that break the rules
  std::size_t worst = none;  // index of the worst element
  double got = 0, want = 0, error = 0, allowed = 0;  // at the worst element
  double max_error = 0;  // largest |got - want| (inf when a non-finite value mismatches)
  double max_ratio = 0;  // largest |got - want| / allowed (inf likewise)
  std::string tolerance_text, problem, note;
  bool norm_wise = false;  // compare_rel_l2: failures counts the non-finite elements (or 1)

  bool ok() const { return failures == 0 && problem.empty(); }
  explicit operator bool() const { return ok(); }
  std::string text() const {
    std::ostringstream s;
    s.precision(9);
    if (!problem.empty()) s << problem << "; ";
    if (norm_wise)
      s << (failures ? "outside" : "within") << " the tolerance over " << count << " elements";
    else if (failures)
      s << failures << " of " << count << " elements outside the tolerance";
    else
      s << "all " << count << " elements within the tolerance";
    if (worst != none && norm_wise)
      s << "; largest |got - want| at index " << worst << ": got " << got << ", want " << want;
    else if (worst != none)
      s << "; worst at index " << worst << ": got " << got << ", want " << want << ", |got - want| "
        << error << ", allowed " << allowed;
    if (!note.empty()) s << "; " << note;
    s << " (" << tolerance_text << ")";
    return s.str();
  }
};

inline std::ostream& operator<<(std::ostream& os, const comparison& c) {
  return os << c.text();
}

namespace detail {

template <class T>
double as_double(const T& x) {
  if constexpr (std::is_arithmetic_v<T>)
    return static_cast<double>(x);
  else
    return static_cast<double>(static_cast<float>(x));  // bf16, f16 and the like
}

template <class R>
std::size_t length(const R& r) {
  if constexpr (std::is_arithmetic_v<R>)
    return 1;
  else
    return static_cast<std::size_t>(std::size(r));
}

template <class R>
double element(const R& r, std::size_t i) {
  if constexpr (std::is_arithmetic_v<R>)
    return static_cast<double>(r);
  else
    return as_double(r[static_cast<std::ptrdiff_t>(i)]);
}

inline std::string tolerance_text(const tolerance& t) {
  std::ostringstream s;
  s << "tolerance atol " << t.atol << " + rtol " << t.rtol << " * max(|want|, " << t.floor << ")";
  return s.str();
}

// The rules above for n elements; allowed(i, want) is the tolerance of element i.
template <class Got, class Want, class Allowed>
comparison compare_elements(std::size_t n, Got got_at, Want want_at, Allowed allowed_at,
                            nans policy, std::string tol_text) {
  comparison c;
  c.count = n;
  c.tolerance_text = std::move(tol_text);
  double worst_ratio = -1;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = got_at(i), w = want_at(i);
    double err, allowed = 0, ratio;
    bool ok;
    if (std::isnan(w)) {
      ok = policy == nans::expected && std::isnan(g);
      err = ok ? 0.0 : std::numeric_limits<double>::infinity();
      ratio = ok ? 0.0 : std::numeric_limits<double>::infinity();
      if (policy == nans::unexpected && c.problem.empty())
        c.problem = "the reference holds NaN at index " + std::to_string(i) +
                    " (pass nans::expected if the test means it)";
    } else if (std::isinf(w)) {
      ok = g == w;
      err = ok ? 0.0 : std::numeric_limits<double>::infinity();
      ratio = ok ? 0.0 : std::numeric_limits<double>::infinity();
    } else {
      allowed = allowed_at(i, w);
      err = std::isfinite(g) ? std::fabs(g - w) : std::numeric_limits<double>::infinity();
      ok = std::isfinite(g) && err <= allowed;
      if (ok)
        ratio = allowed > 0 && std::isfinite(allowed) ? err / allowed : 0.0;
      else
        ratio = std::isfinite(err) && allowed > 0 ? err / allowed
                                                  : std::numeric_limits<double>::infinity();
    }
    if (!ok) ++c.failures;
    c.max_error = std::max(c.max_error, err);
    // Passing elements have ratio <= 1, failing ones > 1: the first of the largest is reported.
    if (ratio > worst_ratio) {
      worst_ratio = c.max_ratio = ratio;
      c.worst = i, c.got = g, c.want = w, c.error = err, c.allowed = allowed;
    }
  }
  return c;
}

}  // namespace detail

// Element by element; got and want: arithmetic scalars, or ranges with size() and operator[]
// (std::vector, std::span, fusedsl::tensor, Eigen vectors, ...) of arithmetic or bf16/f16 values.
template <class Got, class Want>
comparison compare(const Got& got, const Want& want, tolerance tol,
                   nans policy = nans::unexpected) {
  const std::size_t n = detail::length(want);
  comparison c = detail::compare_elements(
      std::min(n, detail::length(got)), [&](std::size_t i) { return detail::element(got, i); },
      [&](std::size_t i) { return detail::element(want, i); },
      [&](std::size_t, double w) { return tol.allowed(w); }, policy, detail::tolerance_text(tol));
  if (detail::length(got) != n)
    c.problem = "got has " + std::to_string(detail::length(got)) + " elements, want " +
                std::to_string(n) + (c.problem.empty() ? "" : "; " + c.problem);
  return c;
}

// Element by element with |got[i] - want[i]| <= rel * scale[i] (an error scale per element, such
// as sum_p |a_ip b_pj| for a product).
template <class Got, class Want, class Scale>
comparison compare_scaled(const Got& got, const Want& want, const Scale& scale, double rel,
                          nans policy = nans::unexpected) {
  const std::size_t n = detail::length(want);
  std::ostringstream t;
  t << "tolerance " << rel << " * scale[i]";
  comparison c = detail::compare_elements(
      std::min({n, detail::length(got), detail::length(scale)}),
      [&](std::size_t i) { return detail::element(got, i); },
      [&](std::size_t i) { return detail::element(want, i); },
      [&](std::size_t i, double) { return rel * std::fabs(detail::element(scale, i)); }, policy,
      t.str());
  if (detail::length(got) != n || detail::length(scale) != n)
    c.problem = "got has " + std::to_string(detail::length(got)) + " elements, scale " +
                std::to_string(detail::length(scale)) + ", want " + std::to_string(n) +
                (c.problem.empty() ? "" : "; " + c.problem);
  return c;
}

// The largest |want[i]| over the finite elements, at least `floor`: a scale for tolerances
// relative to a whole output ("within 1e-5 of the output's scale": abs_tol(1e-5 * max_abs(want))).
template <class Want>
double max_abs(const Want& want, double floor = 1.0) {
  double m = floor;
  for (std::size_t i = 0; i < detail::length(want); ++i) {
    const double w = detail::element(want, i);
    if (std::isfinite(w)) m = std::max(m, std::fabs(w));
  }
  return m;
}

// Norm-wise: ||got - want||_2 / ||want||_2 <= tol (||want|| taken as 1 when it is 0). Every
// element of got must be finite, every element of want too (a NaN or inf fails, never passes).
// The worst element reported is the largest |got - want|; `error` there is that difference and
// `max_error` the norm-wise relative error.
template <class Got, class Want>
comparison compare_rel_l2(const Got& got, const Want& want, double tol) {
  comparison c;
  const std::size_t n = detail::length(want);
  c.count = n;
  std::ostringstream t;
  t << "norm-wise relative L2 error <= " << tol;
  c.tolerance_text = t.str();
  if (detail::length(got) != n)
    c.problem =
        "got has " + std::to_string(detail::length(got)) + " elements, want " + std::to_string(n);
  double num = 0, den = 0, worst = -1;
  std::size_t nonfinite = 0;
  for (std::size_t i = 0; i < std::min(n, detail::length(got)); ++i) {
    const double g = detail::element(got, i), w = detail::element(want, i);
    const double d = std::isfinite(g) && std::isfinite(w) ? std::fabs(g - w)
                                                          : std::numeric_limits<double>::infinity();
    if (!std::isfinite(d)) ++nonfinite;
    if (d > worst) worst = d, c.worst = i, c.got = g, c.want = w, c.error = d;
    if (std::isfinite(d)) num += d * d, den += w * w;
  }
  const double rel =
      nonfinite ? std::numeric_limits<double>::infinity() : std::sqrt(num / (den > 0 ? den : 1.0));
  c.max_error = rel;
  c.norm_wise = true;
  if (!(rel <= tol)) c.failures = nonfinite ? nonfinite : 1;
  std::ostringstream note;
  note.precision(6);
  note << "relative L2 error " << rel;
  if (nonfinite) note << " (" << nonfinite << " non-finite elements)";
  c.note = note.str();
  return c;
}

}  // namespace fusedsl::test
