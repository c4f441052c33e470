// programs.hpp — programs and kernels: builds (inline, from the binary
// cache, in compiler processes), argument info, the values a kernel's
// arguments were last set to (programs.cpp, compilers.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cl/source_access.hpp"
#include "engine/program_cache.hpp"
#include "engine/program_memo.hpp"
#include "engine/records.hpp"

namespace uvcl {

struct ProgramRec {
  // Queued / InProcess: waiting for, or building in, a compiler process;
  // Received: its binary came back and is loaded by poll_builds; Building:
  // clBuildProgram ran (from source, or the binary) and the status is polled.
  enum class Build { Queued, InProcess, Received, Building, Built, Failed };
  std::uint32_t device = 0;
  cl_program program = nullptr;
  Build build = Build::Building;
  std::optional<Error> error;
  BuildCallback on_built;
  std::uint32_t kernels = 0;  // live kernels made from it
  bool released = false;
  // Kept while building: a cached binary that fails to build falls back
  // to the source.
  std::string source, options;
  std::optional<ProgramCache::Key> cache_key;
  bool from_binary = false;
  bool from_process = false;  // the binary came from a compiler process
  std::vector<CachedKernel> cached;  // parameter info stored with the binary
  std::vector<unsigned char> binary;  // from the compiler process, until built
  std::uint64_t build_start_ns = 0;
  // What the source shows of each kernel's parameter use, computed from the
  // source when the build succeeds (the source is not kept after it).
  std::vector<cl::KernelUses> uses;
};

// The value an argument of a kernel object was last set to: launches that
// repeat it skip clSetKernelArg. A buffer is known by its cl_mem and the
// engine's free count, since a freed handle's address may be reused.
struct SetArg {
  std::size_t size = 0;
  std::array<std::byte, 8> bytes{};
  std::uint64_t frees = 0;
  bool valid = false;
  bool operator==(const SetArg&) const = default;
};

struct KernelRec {
  std::uint64_t program = 0;
  std::uint32_t device = 0;
  cl_kernel kernel = nullptr;
  std::string name;
  std::vector<KernelParam> params;
  // Per parameter: WriteOnly inferred from the source, not declared. Such a
  // parameter is write-only only in a launch that stores all of its buffer
  // (stores_whole_buffer); elsewhere the launch reads it, as far as hazards
  // and failures go: what it leaves unstored is what the buffer held.
  std::vector<bool> write_only_inferred;
  bool any_write_only_inferred = false;
  std::vector<SetArg> set_args;  // one per parameter
  std::size_t max_work_group = 0;  // CL_KERNEL_WORK_GROUP_SIZE
  std::uint32_t uses = 0;          // launches in windows or in flight
  bool released = false;
};

struct Programs {
  explicit Programs(Engine::Impl& engine) : e(engine) {}
  Engine::Impl& e;

  std::unordered_map<std::uint64_t, ProgramRec> programs;
  std::unordered_map<std::uint64_t, KernelRec> kernels;
  std::vector<std::uint64_t> building;  // programs being built
  std::unique_ptr<ProgramCache> cache;  // with config.cache_dir
  std::unique_ptr<ProgramMemo> memo;    // built programs, config.program_memo entries
  std::optional<std::string> compiler_path;  // resolved on first need; "" none found
  bool fallback_said = false;  // the inline fallback was reported on stderr (once per engine)

  void poll_builds();
  // From source: creates the program and starts its build.
  cl_int start_build(ProgramRec& p);
  // From opencl.cache_dir: creates the program from a valid cached binary
  // (false: no usable entry).
  bool load_cached(ProgramRec& p);
  // From a compiler process's binary (p.binary): creates the program and
  // starts its build, or fails the program.
  void load_received(std::uint64_t id, ProgramRec& p);
  cl_int build_program(ProgramRec& p);
  void store_in_cache(ProgramRec& p);
  Result<void> query_params(KernelRec& k, const CachedKernel* cached);
  void maybe_free_kernel(std::uint64_t id);
  void maybe_free_program(std::uint64_t id);

  // compilers.cpp
  // Queues the build for the device's compiler process; false: the device
  // builds inline (opencl.compile "inline", or the fallback).
  bool build_in_process(std::uint64_t id, ProgramRec& p);
  void dispatch_builds(DeviceCompilers& dc);  // hands waiting builds to idle processes, starts new ones
  // The compiler program cannot be started: the device's builds, queued and
  // to come, run inline.
  void fall_back_to_inline(DeviceCompilers& dc, const std::string& why);
  void close_compilers();  // shutdown
};

// A build that failed with a build log: the same words whether the log came
// from clBuildProgram here or from a compiler process.
// from_process_binary: the compiler's binary did not build in the engine.
Error build_log_error(std::uint32_t device, const std::string& log, bool from_process_binary);

}  // namespace uvcl
