// programs.cpp — program builds (asynchronous where the driver allows),
// kernels and their parameter access.
#include <algorithm>
#include <cstdio>

#include "cl/kernel_info.hpp"
#include "cl/source_access.hpp"
#include "engine/engine_impl.hpp"
#include "cl/param_check.hpp"

namespace uvcl {

namespace {

void CL_CALLBACK on_build_notify(cl_program, void* token) {
  loop::wake(reinterpret_cast<std::uintptr_t>(token));
}

// opencl.build_options and the compile's own, or the compile's own alone;
// argument info always, for parameter access.
std::string build_options(const Config& config, const std::string& options, BuildOptionsMode mode) {
  std::string out = mode == BuildOptionsMode::Replace ? options
                    : options.empty()                  ? config.build_options
                    : config.build_options.empty()     ? options
                                                       : config.build_options + " " + options;
  if (!out.empty()) out += ' ';
  return out + "-cl-kernel-arg-info";
}

// What the source shows (ProgramRec::uses): a written __global pointer the
// body never reads is WriteOnly. Only where the source's parameters are the
// kernel's, name by name.
void apply_source_uses(const ProgramRec& p, const std::string& entry, KernelRec& rec) {
  std::vector<KernelParam>& params = rec.params;
  for (const cl::KernelUses& k : p.uses) {
    if (k.name != entry) continue;
    if (k.params.size() != params.size()) return;
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i].name != k.params[i].name) return;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (params[i].access != ParamAccess::Written || !k.params[i].never_read) continue;
      params[i].access = ParamAccess::WriteOnly;
      params[i].writes_each_item = k.params[i].writes_each_global_id;
      rec.write_only_inferred.resize(params.size());
      rec.write_only_inferred[i] = true;
      rec.any_write_only_inferred = true;
    }
    return;
  }
}

}  // namespace

Error build_log_error(std::uint32_t device, const std::string& log, bool from_process_binary) {
  return Error{Status::KernelCompilation,
               "clBuildProgram: CL_BUILD_PROGRAM_FAILURE on device " + std::to_string(device) +
                   (from_process_binary ? " (the binary from the OpenCL compiler does not load in the engine's context)"
                                        : "") +
                   "; build log:\n" + log};
}

Result<Program> Engine::compile(std::size_t device, const std::string& source, const std::string& options,
                                BuildCallback on_built, BuildOptionsMode mode) {
  Impl& e = *impl_;
  auto usable = e.usable_device(device, "compile");
  if (!usable) return std::move(usable).error();
  if (source.empty()) return Error{Status::InvalidArgument, "compile: source must not be empty"};
  if (!on_built) return Error{Status::InvalidArgument, "compile: a callback is required (on_built receives the build's result)"};
  if (e.config.debug_asm) std::fprintf(stderr, "uvcl: compiling for device %zu:\n%s\n", device, source.c_str());
  const std::uint64_t id = e.next_handle++;
  ProgramRec& p = e.progs.programs[id];
  p.device = static_cast<std::uint32_t>(device);
  p.on_built = std::move(on_built);
  p.source = source;
  p.options = build_options(e.config, options, mode);
  p.build_start_ns = uv_hrtime();
  if (e.progs.cache) {
    const DeviceInfo& info = usable.value()->dev.info;
    p.cache_key = e.progs.cache->key(info.platform_name + " " + info.platform_version, info.name, info.driver_version,
                               p.options, source);
  }
  if (e.progs.memo) {
    if (auto hit = e.progs.memo->find(p.device, p.options, source);
        hit && e.api->clRetainProgram(static_cast<cl_program>(hit->program)) == CL_SUCCESS) {
      // Built already: poll_builds runs on_built from the loop, as for a build.
      p.program = static_cast<cl_program>(hit->program);
      p.cached = *hit->kernels;
      p.build = ProgramRec::Build::Built;
      ++e.counters.program_memo_hits;
      e.progs.building.push_back(id);
      e.update_busy();
      return Program{id};
    }
    ++e.counters.program_memo_misses;
  }
  // The memo and the disk cache stay in front: a warm compile never reaches
  // a compiler process.
  if (!e.progs.load_cached(p) && e.progs.build_in_process(id, p)) {
    e.progs.building.push_back(id);
    e.update_busy();
    return Program{id};
  }
  cl_int rc = p.program ? e.progs.build_program(p) : e.progs.start_build(p);
  if (rc != CL_SUCCESS) {
    const bool created = p.program != nullptr;
    Error err = cl::call_error(Status::KernelCompilation, created ? "clBuildProgram" : "clCreateProgramWithSource", rc);
    if (!created) {
      e.progs.programs.erase(id);
      return err;
    }
    p.build = ProgramRec::Build::Failed;
    p.error = std::move(err);
  }
  e.progs.building.push_back(id);
  e.update_busy();
  return Program{id};
}

bool Programs::load_cached(ProgramRec& p) {
  if (!cache || !p.cache_key) return false;
  auto entry = cache->load(*p.cache_key);
  if (!entry) return false;
  DeviceCtx& d = *e.devices[p.device];
  const unsigned char* bin = entry->binary.data();
  const std::size_t len = entry->binary.size();
  cl_int bin_status = CL_SUCCESS, rc = CL_SUCCESS;
  cl_program prog = e.api->clCreateProgramWithBinary(d.context, 1, &d.dev.id, &len, &bin, &bin_status, &rc);
  if (rc != CL_SUCCESS || bin_status != CL_SUCCESS) {
    if (prog) e.api->clReleaseProgram(prog);
    return false;
  }
  p.program = prog;
  p.from_binary = true;
  p.cached = std::move(entry->kernels);
  return true;
}

cl_int Programs::start_build(ProgramRec& p) {
  DeviceCtx& d = *e.devices[p.device];
  if (p.program) e.api->clReleaseProgram(p.program);
  p.from_binary = false;
  p.cached.clear();
  const char* src = p.source.c_str();
  const std::size_t len = p.source.size();
  cl_int rc = CL_SUCCESS;
  p.program = e.api->clCreateProgramWithSource(d.context, 1, &src, &len, &rc);
  if (rc != CL_SUCCESS) {
    p.program = nullptr;
    return rc;
  }
  ++e.counters.inline_builds;
  return build_program(p);
}

// With a notify callback a driver may build asynchronously (NVIDIA does;
// PoCL builds right here); either way poll_builds reads the status and
// on_built runs from the loop.
cl_int Programs::build_program(ProgramRec& p) {
  DeviceCtx& d = *e.devices[p.device];
  p.build = ProgramRec::Build::Building;
  cl_int rc = e.api->clBuildProgram(p.program, 1, &d.dev.id, p.options.c_str(), on_build_notify,
                                  reinterpret_cast<void*>(e.handles->wake_token()));
  if (rc == CL_BUILD_PROGRAM_FAILURE || rc == CL_INVALID_BINARY) rc = CL_SUCCESS;  // poll_builds reads the log
  return rc;
}

void Programs::load_received(std::uint64_t id, ProgramRec& p) {
  DeviceCtx& d = *e.devices[p.device];
  const unsigned char* bin = p.binary.data();
  const std::size_t len = p.binary.size();
  cl_int bin_status = CL_SUCCESS, rc = CL_SUCCESS;
  cl_program prog = e.api->clCreateProgramWithBinary(d.context, 1, &d.dev.id, &len, &bin, &bin_status, &rc);
  const char* call = "clCreateProgramWithBinary";
  if (rc == CL_SUCCESS && bin_status == CL_SUCCESS) {
    p.program = prog;
    p.from_binary = p.from_process = true;
    call = "clBuildProgram";
    rc = build_program(p);
  } else {
    if (prog) e.api->clReleaseProgram(prog);
    if (rc == CL_SUCCESS) rc = bin_status;
  }
  if (rc == CL_SUCCESS) return;
  p.build = ProgramRec::Build::Failed;
  p.error = cl::call_error(Status::KernelCompilation, call, rc)
                .context("program " + std::to_string(id) + " on device " + std::to_string(p.device) +
                         ": the binary from the OpenCL compiler does not load in the engine's context");
}

// Best effort: the binary and every kernel's parameter info.
void Programs::store_in_cache(ProgramRec& p) {
  std::size_t size = 0;
  if (e.api->clGetProgramInfo(p.program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS ||
      size == 0)
    return;
  CacheEntry entry;
  entry.binary.resize(size);
  unsigned char* ptr = entry.binary.data();
  if (e.api->clGetProgramInfo(p.program, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS) return;
  auto infos = cl::program_kernels(*e.api, p.program);
  if (!infos) return;
  entry.kernels = std::move(infos.value());
  const bool stored = cache->store(*p.cache_key, entry);
  if (e.config.debug_backends)
    std::fprintf(stderr, "uvcl: program cache: %s %s\n", stored ? "stored" : "could not store",
                 p.cache_key->file.c_str());
}

void Programs::poll_builds() {
  for (std::size_t i = 0; i < building.size();) {
    const std::uint64_t id = building[i];
    ProgramRec& p = programs.at(id);
    cl_device_id dev = e.devices[p.device]->dev.id;
    if (p.build == ProgramRec::Build::Queued || p.build == ProgramRec::Build::InProcess) {
      ++i;  // the compiler process's result, or its failure, moves it on
      continue;
    }
    if (p.build == ProgramRec::Build::Received) load_received(id, p);
    if (p.build == ProgramRec::Build::Building) {
      cl_build_status status = CL_BUILD_IN_PROGRESS;
      cl_int rc = e.api->clGetProgramBuildInfo(p.program, dev, CL_PROGRAM_BUILD_STATUS, sizeof status, &status,
                                             nullptr);
      if (rc == CL_SUCCESS && status == CL_BUILD_IN_PROGRESS) {
        ++i;
        continue;
      }
      if (rc != CL_SUCCESS) {
        // The query failed, not necessarily the build: say which.
        p.build = ProgramRec::Build::Failed;
        p.error = cl::call_error(Status::KernelCompilation, "clGetProgramBuildInfo(CL_PROGRAM_BUILD_STATUS)", rc);
        p.error->context("program " + std::to_string(id) + " on device " + std::to_string(p.device));
      } else if (status == CL_BUILD_SUCCESS) {
        p.build = ProgramRec::Build::Built;
        if (cache && p.cache_key && p.from_process) {
          const bool stored = cache->store(*p.cache_key, CacheEntry{std::move(p.binary), p.cached});
          if (e.config.debug_backends)
            std::fprintf(stderr, "uvcl: program cache: %s %s\n", stored ? "stored" : "could not store",
                         p.cache_key->file.c_str());
        } else if (cache && p.cache_key && !p.from_binary) {
          store_in_cache(p);
        }
        if (memo && memo->capacity() > 0 && e.api->clRetainProgram(p.program) == CL_SUCCESS)
          memo->insert(p.device, p.options, p.source, p.program, p.cached);
      } else if (p.from_binary && !p.from_process) {
        // A cached binary this driver will not build: build the source.
        if (start_build(p) == CL_SUCCESS) {
          ++i;
          continue;
        }
        p.build = ProgramRec::Build::Failed;
        p.error = Error{Status::KernelCompilation, "clBuildProgram: rebuilding from source failed"};
      } else {
        p.build = ProgramRec::Build::Failed;
        // A binary from the compiler process that does not build here is
        // not rebuilt from source: that would be a build on the loop.
        p.error = build_log_error(p.device, cl::build_log(*e.api, p.program, dev), p.from_process);
      }
    }
    building[i] = building.back();
    building.pop_back();
    if (p.build == ProgramRec::Build::Built) p.uses = cl::kernel_uses(p.source, p.options);
    p.source.clear();
    p.source.shrink_to_fit();
    p.binary.clear();
    p.binary.shrink_to_fit();
    if (e.config.debug_backends)
      std::fprintf(stderr, "uvcl: program %llu built in %.1f ms (%s)\n", static_cast<unsigned long long>(id),
                   static_cast<double>(uv_hrtime() - p.build_start_ns) / 1e6,
                   p.from_process ? "compiler process" : p.from_binary ? "cached binary" : "source");
    BuildCallback cb = std::move(p.on_built);
    Result<void> r;
    if (p.build == ProgramRec::Build::Failed) r = *p.error;
    else if (p.released)  // the caller gave the program up: no success for a handle that is dead
      r = Error{Status::Cancelled, "compile: program " + std::to_string(id) + " was released before its build finished"};
    if (cb) in_user_callback(e, [&] { cb(std::move(r)); });
    maybe_free_program(id);  // released before on_built ran
  }
}

Result<Kernel> Engine::kernel(Program prog, const std::string& entry, std::vector<ParamAccess> declared) {
  Impl& e = *impl_;
  UVCL_TRY(e.refuse_new_work("kernel"));
  auto it = e.progs.programs.find(prog.id);
  if (it == e.progs.programs.end() || it->second.released)
    return Error{Status::InvalidArgument, "kernel: program " + std::to_string(prog.id) + " is not a live program"};
  if (entry.empty()) return Error{Status::InvalidArgument, "kernel: the entry point name must not be empty"};
  ProgramRec& p = it->second;
  if (p.build != ProgramRec::Build::Built && p.build != ProgramRec::Build::Failed)
    return Error{Status::InvalidArgument, "kernel: program " + std::to_string(prog.id) + " is still building"};
  if (p.build == ProgramRec::Build::Failed)
    return Error{Status::KernelCompilation, "kernel: program " + std::to_string(prog.id) + " failed to build"};
  cl_int rc = CL_SUCCESS;
  cl_kernel k = e.api->clCreateKernel(p.program, entry.c_str(), &rc);
  if (rc == CL_INVALID_KERNEL_NAME)
    return Error{Status::KernelCompilation, "kernel entry point \"" + entry + "\" not found in program " +
                                                std::to_string(prog.id) + " (CL_INVALID_KERNEL_NAME)"};
  if (rc != CL_SUCCESS) return cl::call_error(Status::KernelCompilation, "clCreateKernel", rc).context(entry);
  KernelRec rec;
  rec.program = prog.id;
  rec.device = p.device;
  rec.kernel = k;
  rec.name = entry;
  const CachedKernel* cached = nullptr;
  for (const CachedKernel& ck : p.cached)
    if (ck.name == entry) cached = &ck;
  if (auto q = e.progs.query_params(rec, cached); !q) {
    e.api->clReleaseKernel(k);
    return std::move(q).error().context("kernel " + entry);
  }
  apply_source_uses(p, entry, rec);
  for (KernelParam& param : rec.params) param.unsupported = param_refusal(param);
  if (!declared.empty()) {
    if (declared.size() != rec.params.size()) {
      e.api->clReleaseKernel(k);
      return Error{Status::IncorrectKernelArg, "kernel " + entry + ": " + std::to_string(declared.size()) +
                                                   " parameter accesses declared, the kernel has " +
                                                   std::to_string(rec.params.size()) + " parameters"};
    }
    for (std::size_t i = 0; i < declared.size(); ++i) {
      if (!declared_access_fits(rec.params[i].access, declared[i])) {
        e.api->clReleaseKernel(k);
        return Error{Status::IncorrectKernelArg,
                     "kernel " + entry + ": parameter " + std::to_string(i) + " (" + rec.params[i].type_name + " " +
                         rec.params[i].name + ") takes " + param_kind_text(rec.params[i].access) +
                         ", but the declared access takes " + param_kind_text(declared[i])};
      }
      rec.params[i].access = declared[i];
    }
    rec.write_only_inferred.clear();  // declared: trusted as declared
    rec.any_write_only_inferred = false;
  }
  const std::uint64_t id = e.next_handle++;
  e.progs.kernels.emplace(id, std::move(rec));
  ++p.kernels;
  return Kernel{id};
}

Result<void> Programs::query_params(KernelRec& k, const CachedKernel* cached) {
  cl_int rc = e.api->clGetKernelWorkGroupInfo(k.kernel, e.devices[k.device]->dev.id, CL_KERNEL_WORK_GROUP_SIZE,
                                            sizeof k.max_work_group, &k.max_work_group, nullptr);
  if (rc != CL_SUCCESS) k.max_work_group = e.devices[k.device]->dev.info.max_work_group_size;
  if (cached) {  // argument info is only guaranteed for programs built from source
    k.params = cached->params;
    return {};
  }
  auto params = cl::kernel_params(*e.api, k.kernel);
  if (!params) return std::move(params).error();
  k.params = std::move(params.value());
  return {};
}

Result<std::vector<KernelParam>> Engine::kernel_params(Kernel k) const {
  auto it = impl_->progs.kernels.find(k.id);
  if (it == impl_->progs.kernels.end() || it->second.released)
    return Error{Status::InvalidArgument, "kernel_params: kernel " + std::to_string(k.id) + " is not a live kernel"};
  return it->second.params;
}

Result<void> Engine::release(Program p) {
  Impl& e = *impl_;
  e.check_thread("release");
  if (e.released_everything()) return {};  // closed or being destroyed: released with everything else
  auto it = e.progs.programs.find(p.id);
  if (it == e.progs.programs.end() || it->second.released)
    return Error{Status::InvalidArgument, "release: program " + std::to_string(p.id) + " is not a live program"};
  // Still building, or built with on_built not yet run: freed once on_built
  // has run (poll_builds), which it still does, exactly once, with Cancelled.
  it->second.released = true;
  e.progs.maybe_free_program(p.id);
  return {};
}

Result<void> Engine::release(Kernel k) {
  Impl& e = *impl_;
  e.check_thread("release");
  if (e.released_everything()) return {};  // closed or being destroyed: released with everything else
  auto it = e.progs.kernels.find(k.id);
  if (it == e.progs.kernels.end() || it->second.released)
    return Error{Status::InvalidArgument, "release: kernel " + std::to_string(k.id) + " is not a live kernel"};
  it->second.released = true;
  e.progs.maybe_free_kernel(k.id);
  return {};
}

// Deferred while launches use it: the seed used a released program after free.
void Programs::maybe_free_kernel(std::uint64_t id) {
  auto it = kernels.find(id);
  if (it == kernels.end() || !it->second.released || it->second.uses > 0) return;
  const std::uint64_t program = it->second.program;
  e.api->clReleaseKernel(it->second.kernel);
  kernels.erase(it);
  auto p = programs.find(program);
  if (p != programs.end()) {
    --p->second.kernels;
    maybe_free_program(program);
  }
}

void Programs::maybe_free_program(std::uint64_t id) {
  auto it = programs.find(id);
  if (it == programs.end() || !it->second.released || it->second.kernels > 0) return;
  if (std::find(building.begin(), building.end(), id) != building.end()) return;  // on_built still to run
  e.api->clReleaseProgram(it->second.program);
  programs.erase(it);
}

}  // namespace uvcl
