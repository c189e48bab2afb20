// libFuzzer target for the .npy reader: any bytes either parse or throw npy_error; whatever
// parses must serialize back to bytes that parse to the same array.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fusedsl/io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fusedsl::io;
  npy_array a;
  try {
    a = parse_npy(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const npy_error&) {
    return 0;
  }
  const npy_array b = parse_npy(serialize_npy(a.dtype, a.shape, a.data));
  if (b.shape != a.shape || b.dtype != a.dtype || b.data != a.data) std::abort();
  (void)a.as_doubles();
  return 0;
}
