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

#include <cstdint>
#include <span>

#include "uvcl/kernel_param.hpp"

namespace uvcl {

// Why uvcl cannot pass an argument for `p` (its KernelParam::unsupported),
// from its type name and inferred access; null when it can.
const char* param_refusal(const KernelParam& p) noexcept;

// Whether a declared access keeps the kind of argument the parameter takes:
// a buffer access for a __global or __constant pointer, Local for a
// __local one, Scalar for the rest. Declaring another kind would pass a
// scalar where the kernel dereferences a pointer.
bool declared_access_fits(ParamAccess inferred, ParamAccess declared) noexcept;

// Whether a launch over `global` (work-items per axis) stores every byte of a
// `bytes`-byte buffer through parameter `p`: the source stores element
// get_global_id(0) in every work-item (KernelParam::writes_each_item), the
// range is one-dimensional (other axes 1), below 2^31 work-items (the
// kernel's index may be an int), with at least the buffer's elements of the
// pointee type. Never for a 3-vector pointee, whose store may leave the
// padding lane.
bool stores_whole_buffer(const KernelParam& p, std::span<const std::uint64_t> global, std::size_t bytes);

// The argument an access takes, for messages: "a buffer", "a scalar", "a local size".
const char* param_kind_text(ParamAccess a) noexcept;

}  // namespace uvcl
