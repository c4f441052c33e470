// files.hpp — opening and reading files uvcl is pointed at (job files and
// the files they name, configs, token files, the OpenCL library, the program
// cache), safely.
//
// Only regular files are read. Opening a FIFO for reading blocks until a
// writer comes (a hang), and a device such as /dev/zero never ends (memory
// without bound): either is an error naming the path and what it is
// ("x.json: not a regular file (a FIFO)"), decided before any byte is read.
// Files are opened with O_NONBLOCK so that a FIFO swapped in between the
// check and the open cannot block either.
#pragma once

#include <cstdint>
#include <string>

#include "uvcl/status.hpp"

namespace uvcl::files {

// "a directory", "a FIFO", "a character device", ... for a st_mode.
const char* type_name(unsigned mode) noexcept;

// Opens `path` read-only if it is a regular file: the descriptor (close
// it), or an Io error "<path>: cannot read: ..." naming the reason.
Result<int> open_regular(const std::string& path);

// An Io error unless `path` names (after symbolic links) a regular file.
Result<void> require_regular(const std::string& path);

// Reads a whole regular file of at most `max_bytes` bytes. A larger one is
// an Io error "<path>: larger than <max_bytes> bytes (<why>)", found from
// its size before reading, and again while reading (files in /proc report
// size 0).
Result<std::string> read_regular(const std::string& path, std::uint64_t max_bytes = UINT64_MAX,
                                 const char* why = "the limit");

}  // namespace uvcl::files
