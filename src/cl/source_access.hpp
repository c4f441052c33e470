// source_access.hpp — what a kernel's OpenCL C source shows about how it
// uses its parameters, beyond kernel argument info: a `__global` pointer the
// body only ever stores through, and one each work-item stores its own
// element of. Pure text analysis (no OpenCL calls), conservative: any
// construct it does not understand yields false, never a guess.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace uvcl::cl {

struct ParamUse {
  std::string name;  // the parameter's name in the source
  // Every occurrence of the name in the kernel's body is `NAME[expr] = ...`
  // (plain assignment): the body never reads what the parameter points to.
  // False when the name does not occur at all.
  bool never_read = false;
  // never_read, and a statement of the body's outermost block, not under any
  // condition or loop, stores `NAME[g] = ...` with g = get_global_id(0)
  // (written out, or an integer variable initialised with it there and never
  // changed); the body has no `return` or `goto`. So every work-item g of
  // dimension 0 stores element g (for g < 2^31: the variable may be an int).
  bool writes_each_global_id = false;
};

struct KernelUses {
  std::string name;
  std::vector<ParamUse> params;  // in order
};

// Every kernel defined in `source` that the analysis understands, in the
// order defined. Empty when the source has a preprocessor directive other
// than #pragma (a macro could hide a read), when `build_options` define a
// macro (-D) whose name occurs in the source or include a file (-include,
// -imacros), or when the source does not tokenize (unbalanced brackets, an
// unterminated comment or literal, digraphs, trigraphs).
std::vector<KernelUses> kernel_uses(std::string_view source, std::string_view build_options = {});

// The parameters of the kernel `kernel_name`, in order; empty when it is not
// found or not understood (see kernel_uses).
std::vector<ParamUse> param_uses(std::string_view source, std::string_view kernel_name,
                                 std::string_view build_options = {});

}  // namespace uvcl::cl
