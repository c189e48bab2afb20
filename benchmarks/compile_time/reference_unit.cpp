// The yardstick of compile_time.ratios (ratio_check.py): a fixed unit of ordinary template-heavy
// C++ that includes nothing of fusedsl's, so that a fusedsl unit's compile time can be checked as a
// ratio to it, measured in the same run on the same machine. Dense Eigen products at fixed and
// dynamic sizes, LU solves at fixed sizes, and a few standard containers and algorithms.
#include <Eigen/Dense>
#include <algorithm>
#include <iostream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

template <int N>
double fixed_size_work() {
  using M = Eigen::Matrix<double, N, N>;
  M a = M::Random(), b = M::Random();
  M c = a * b + b.transpose() * a;
  Eigen::Matrix<double, N, 1> x = c.partialPivLu().solve(Eigen::Matrix<double, N, 1>::Ones());
  return x.sum() + c.trace();
}

double dynamic_work(int n) {
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n);
  Eigen::MatrixXf c = (a * b).cwiseMax(0.0f) + a.transpose();
  return double((c * Eigen::VectorXf::Ones(n)).squaredNorm());
}

int main(int argc, char**) {
  std::map<std::string, double> results;
  results["fixed 4"] = fixed_size_work<4>();
  results["fixed 8"] = fixed_size_work<8>();
  results["dynamic"] = dynamic_work(16 + argc);
  std::vector<double> values;
  for (const auto& [name, v] : results) values.push_back(v);
  std::sort(values.begin(), values.end());
  std::cout << std::accumulate(values.begin(), values.end(), 0.0) << "\n";
}
