#pragma once
// fusedsl: header-only C++20 tensor DSL with compile-time fusion. The umbrella header.
#include "fusedsl/core/dtype.hpp"
#include "fusedsl/core/error.hpp"
#include "fusedsl/core/fixed_string.hpp"
#include "fusedsl/core/shape.hpp"
#include "fusedsl/core/tensor.hpp"
#include "fusedsl/expr/expression.hpp"
#include "fusedsl/expr/nn.hpp"
#include "fusedsl/expr/ops.hpp"
#include "fusedsl/graph/builder.hpp"
#include "fusedsl/graph/flatten.hpp"
#include "fusedsl/graph/node.hpp"
#include "fusedsl/graph/print.hpp"
