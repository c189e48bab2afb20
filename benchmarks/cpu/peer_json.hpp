#pragma once
// What the benchmark peers (benchmarks/race/race_peer.cpp, benchmarks/model/user_model_peer.cpp)
// share: JSON text for their replies (the escaping and numbers of tpu/json.hpp) and the loop that
// serves a Python driver's requests on stdin.
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "fusedsl/core/shape.hpp"
#include "fusedsl/tpu/json.hpp"

namespace fusedsl_bench {

using fusedsl::tpu::json_number;
using fusedsl::tpu::json_string;

inline std::string json_shape(const fusedsl::dims& s) {
  std::string r = "[";
  for (int i = 0; i < s.rank; ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Serves requests, one a line, until `quit` or the end of stdin: `run K` (K >= 1) is answered with
// timed(K), handed to reply; anything else throws, naming the request after `who`.
template <class Timed, class Reply>
int serve_requests(const std::string& who, Timed timed, Reply reply) {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd == "quit") return 0;
    long calls = 0;
    if (cmd != "run" || !(in >> calls) || calls < 1)
      throw std::runtime_error(who + ": unknown request: " + line);
    reply(timed(calls));
  }
  return 0;
}

}  // namespace fusedsl_bench
