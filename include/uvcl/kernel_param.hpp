// uvcl/kernel_param.hpp — what uvcl knows of a kernel's parameter.
#pragma once

#include <cstddef>
#include <string>

namespace uvcl {

// How a kernel uses a parameter. Inferred from kernel argument info
// (`const __global T*` and `__constant` read-only, other `__global` written,
// `__local` local, the rest scalar) unless declared when the kernel is made;
// a `__global` pointer the kernel's source only ever stores through
// (`NAME[i] = ...`, nothing else; no preprocessor directive but #pragma) is
// inferred WriteOnly instead of Written. Written: read and written.
// WriteOnly: the kernel reads nothing the launch did not write first, so the
// launch neither waits for nor inherits a failure of the buffer's previous
// contents; it makes a poisoned buffer valid again.
enum class ParamAccess { ReadOnly, Written, Scalar, Local, WriteOnly };

struct KernelParam {
  std::string name;
  std::string type_name;       // as the compiler reports it ("float*", "uint")
  ParamAccess access = ParamAccess::Scalar;
  std::size_t scalar_size = 0; // bytes for scalars; 0 when unknown
  // Why uvcl cannot pass an argument for this parameter, or null when it
  // can: an image, a sampler, a pipe or device queue, or a by-value type
  // whose size uvcl cannot determine (a struct, a union, a typedef name).
  // Every launch of the kernel is refused (IncorrectKernelArg) naming the
  // parameter, its type and this reason.
  const char* unsupported = nullptr;
  // The kernel's source shows each work-item g of dimension 0 storing
  // element g of this parameter unconditionally (`p[get_global_id(0)] = ...`
  // in the body's outermost block, no return or goto; g below 2^31), and
  // nothing reading it. False when unknown.
  bool writes_each_item = false;
};

}  // namespace uvcl
