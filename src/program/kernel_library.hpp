// kernel_library.hpp — the kernels a server runs by name (uvcl serve
// --kernels DIR): every `.cl` file of a folder, built for every device at
// start-up.
//
// A job names one as "FILE:ENTRY" in a launch (docs/job-format.md): FILE is
// the file's name without `.cl`, ENTRY a kernel function in it. The job
// runner makes a kernel of the library's program for each job and releases
// it with the job; the programs live as long as the library.
//
// The files are the operator's: they are built as written, with the
// engine's opencl.build_options, each on its own (an #include resolves as
// for any build, not against DIR).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "uvcl/engine.hpp"

namespace uvcl::job {

class KernelLibrary {
 public:
  // Builds every regular `*.cl` file of `dir` (not its subfolders) for every
  // device of `engine`, running the engine's loop until all are built: for
  // start-up, before the loop serves anything else. Errors name the option
  // (`what`), the file and, for a build, the device and the build log; a
  // folder without `.cl` files is an error too. A file name must be
  // [A-Za-z0-9_.-] before `.cl` (no ':', which separates FILE from ENTRY).
  static Result<std::unique_ptr<KernelLibrary>> load(Engine& engine, const std::string& dir,
                                                     const std::string& what = "--kernels");
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;

  // The program of FILE built for `device`; an InvalidJob error naming the
  // files there is if FILE is not one of them.
  Result<uvcl::Program> program(const std::string& file, std::size_t device) const;
  // FILE names, sorted.
  std::vector<std::string> files() const;
  const std::string& dir() const { return dir_; }

 private:
  KernelLibrary(Engine& engine, std::string dir) : engine_(engine), dir_(std::move(dir)) {}

  Engine& engine_;
  std::string dir_;
  std::map<std::string, std::vector<uvcl::Program>> programs_;  // FILE -> one per device
  std::weak_ptr<const void> engine_alive_;
};

}  // namespace uvcl::job
