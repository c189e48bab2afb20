#pragma once
// The names a program reads at run time (graph/bindings.hpp: the order and the names inside
// repeated blocks), and the checks of what is bound to them.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "fusedsl/core/error.hpp"
#include "fusedsl/core/tensor.hpp"
#include "fusedsl/graph/bindings.hpp"
#include "fusedsl/graph/builder.hpp"
#include "fusedsl/graph/node.hpp"

namespace fusedsl::reference {

// The binding order and names are the graph's (graph/bindings.hpp).
using graph::binding_spec;
using graph::describe;
using graph::layer_name;
using graph::required_bindings;

// Throws binding_error unless t matches spec: `binding "w": expected f32[128,64], got f32[64,128]`.
inline void check_binding(const binding_spec& spec, const tensor_ref& t) {
  if (t.type != spec.type || !(t.shape == spec.shape))
    throw binding_error("binding \"" + spec.name + "\": expected " +
                        describe(spec.type, spec.shape) + ", got " + describe(t.type, t.shape));
  if (t.data == nullptr && t.shape.size() != 0)
    throw binding_error("binding \"" + spec.name + "\": the tensor has no data (null pointer)");
}

}  // namespace fusedsl::reference
