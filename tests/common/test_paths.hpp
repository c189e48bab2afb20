#pragma once
// Paths the build gives a test as defines (data folders, generated case folders, tools) are written
// relative to the folder of the test's executable (cmake/FusedslHelpers.cmake, fusedsl_test_paths),
// so that two clones of the repository compile the same test object and share one compiler cache.
// test_path turns such a define into a path to open, wherever the test is run from.
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace fusedsl::test {

// The folder that holds the running executable (Linux: /proc/self/exe).
inline std::filesystem::path executable_folder() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    throw std::runtime_error("test_path: cannot read /proc/self/exe (" + ec.message() +
                             "); the tests find their data relative to their executable");
  }
  return exe.parent_path();
}

// `relative` resolved against the executable's folder; an absolute path is returned as it is.
inline std::string test_path(const char* relative) {
  const std::filesystem::path p(relative);
  if (p.is_absolute()) return p.string();
  return (executable_folder() / p).lexically_normal().string();
}

}  // namespace fusedsl::test
