// untrusted_source.hpp — what a kernel source and its build options from
// the network (uvcl serve) may not do.
//
// On PoCL a kernel is built and run inside the server's process, so a
// source sent by a client must not reach the server's files or its stdout:
// - no preprocessor directive that reads files or steers the compiler
//   (#include, #import, #pragma, _Pragma, __has_include): the identifiers
//   are refused wherever they appear, comments included, since a directive
//   can be spelled in many ways (line splices, digraphs) but its name
//   always appears literally — macros cannot make directives;
// - no printf (its output is the server's stdout): any identifier holding
//   "printf" is refused. A name pasted together with ## still gets through
//   (a -D cannot rename printf: OpenCL's own header declares it), so uvcl
//   serve also points its stdout at /dev/null;
// - build options from an allow-list only: -D, -U, -w, -Werror, -cl-*
//   (-I, -include, -imacros, -Xclang, ... read files or load code), no
//   control characters (a newline in a -D value starts a new line of the
//   compiler's predefines: an #include there).
// Trigraphs are refused outright (??/ splices lines).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace uvcl::job {

// Why `source` may not be built for a network client (with the line it is
// on), or nullopt when it may.
std::optional<std::string> refuse_untrusted_source(std::string_view source);
// Why `options` may not be used, or nullopt.
std::optional<std::string> refuse_untrusted_options(std::string_view options);
// A build log without the server's paths: every absolute path is replaced
// by "<source>" (a .cl file) or "<path>".
std::string scrub_paths(std::string_view log);

}  // namespace uvcl::job
