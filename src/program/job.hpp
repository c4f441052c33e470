// job.hpp — the `uvcl run` job format (docs/job-format.md), parsed.
//
// Contract: parse_job validates the document completely — types, counts,
// names referenced by launches and outputs — and returns an InvalidJob error
// naming the key path ("job.json: launches[2].args[0]: unknown buffer \"x\"").
// Checks that need a compiled kernel (argument count and kinds) belong to the
// runner. Files named by "file" keys are not read here: the runner resolves
// them against RunOptions::base_dir (job_runner.hpp: the job file's folder). With allow_files false (uvcl serve)
// any "file" key is an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "uvcl/status.hpp"
#include "uvcl/types.hpp"

namespace uvcl::job {

struct Init {
  enum class Kind { Zero, Fill, Data, File, Safetensors };
  Kind kind = Kind::Zero;
  std::vector<std::byte> bytes;  // Fill: one element; Data: count elements (little-endian)
  std::string path;              // File / Safetensors: as written in the job
  std::string tensor;            // Safetensors: tensor name
};

struct Buffer {
  std::string name;
  ScalarType type = ScalarType::Float;
  std::uint64_t count = 0;
  Init init;
};

struct Kernel {
  std::string name;
  // A kernel of a library (uvcl serve/run --kernels DIR), named
  // "FILE:ENTRY" by a launch and not defined in "kernels": FILE, the .cl
  // file's name without the extension (entry holds ENTRY). Empty: the job's
  // own kernel, built from source or file.
  std::string library;
  std::string source;  // inline source, or empty when `file` is set
  std::string file;    // as written in the job
  std::string entry;   // defaults to name
  std::string options;  // added to the build options
  // "build_options": replaces opencl.build_options for this kernel's build.
  std::optional<std::string> build_options;
};

struct Arg {
  enum class Kind { Buffer, Scalar, Local };
  Kind kind = Kind::Buffer;
  std::size_t buffer = 0;  // index into Job::buffers
  Scalar scalar;
  std::uint64_t local_bytes = 0;
};

// A "device" of "any": the runner picks the device per launch
// (Engine::choose_device).
inline constexpr std::size_t kAnyDevice = SIZE_MAX;

struct Launch {
  std::size_t kernel = 0;  // index into Job::kernels
  std::optional<std::size_t> device;  // a device index or kAnyDevice; absent: the job's
  std::vector<Arg> args;
  std::vector<std::uint64_t> global;  // 1..3 positive
  std::vector<std::uint64_t> local;   // empty or same length as global
  std::uint64_t repeat = 1;
};

struct Job {
  std::optional<std::size_t> device;  // a device index or kAnyDevice; absent: 0
  std::vector<Buffer> buffers;   // in document order
  std::vector<Kernel> kernels;   // in document order
  std::vector<Launch> launches;
  std::vector<std::size_t> outputs;  // indexes into buffers
};

struct ParseOptions {
  bool allow_files = true;
  // Kernel sources and options come from the network (uvcl serve): they are
  // held to untrusted_source.hpp (no #include, #pragma, printf; options
  // from an allow-list) and refused with an InvalidJob error naming the key.
  bool untrusted_kernels = false;
};

Result<Job> parse_job(std::string_view json, std::string_view origin, const ParseOptions& options = {});
Result<Job> load_job_file(const std::string& path, const ParseOptions& options = {});

}  // namespace uvcl::job
