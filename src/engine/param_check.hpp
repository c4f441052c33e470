// param_check.hpp — which kernel parameters uvcl can give an argument.
//
// uvcl passes three kinds of argument: buffers (to __global and __constant
// pointers), local sizes (to __local pointers) and scalars of a built-in
// type. Anything else — an image, a sampler, a pipe, a struct by value, a
// typedef name whose size OpenCL does not report — would be handed to the
// driver with a size or object it does not expect: PoCL dereferences a
// buffer given for an image2d_t (a crash) and reads past a 4-byte scalar
// given for a struct (host memory). Such parameters are refused at launch.
#pragma once

#include "uvcl/engine.hpp"

namespace uvcl {

// Why uvcl cannot pass an argument for `p` (its KernelParam::unsupported),
// from its type name and inferred access; null when it can.
const char* param_refusal(const KernelParam& p) noexcept;

// Whether a declared access keeps the kind of argument the parameter takes:
// a buffer access for a __global or __constant pointer, Local for a
// __local one, Scalar for the rest. Declaring another kind would pass a
// scalar where the kernel dereferences a pointer.
bool declared_access_fits(ParamAccess inferred, ParamAccess declared) noexcept;

// The argument an access takes, for messages: "a buffer", "a scalar", "a local size".
const char* param_kind_text(ParamAccess a) noexcept;

}  // namespace uvcl
