// compiler_path.hpp — where the engine looks for uvcl-compiler.
//
// opencl.compiler when given; else paths near the binary that holds the
// engine's code (libuvcl.so, or a program that links the engine's parts
// itself), then the configured installation path. Which paths are "near"
// depends on that binary (src/meson.build builds compiler_path.cpp once per
// kind): beside libuvcl in the build tree and the libexecdir relative to an
// installed libdir; for the uvcl program, relative to its bindir; for the
// tests and benchmarks, the build tree's own uvcl-compiler.
#pragma once

#include <string>
#include <vector>

#include "uvcl/config.hpp"

namespace uvcl {

// The paths to try, in order, without duplicates.
std::vector<std::string> compiler_candidates(const Config& config);

}  // namespace uvcl
