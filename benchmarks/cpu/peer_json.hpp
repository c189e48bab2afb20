#pragma once
// JSON text for the replies of the benchmark peers (benchmarks/race/race_peer.cpp,
// benchmarks/model/user_model_peer.cpp) that Python drivers read line by line.
#include <cmath>
#include <cstdio>
#include <string>

#include "fusedsl/core/shape.hpp"

namespace fusedsl_bench {

inline std::string json_string(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    r += c;
  }
  return r + "\"";
}

// A number, or null where it is not finite (JSON has no NaN or infinity).
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

inline std::string json_shape(const fusedsl::dims& s) {
  std::string r = "[";
  for (int i = 0; i < s.rank; ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace fusedsl_bench
