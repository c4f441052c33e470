// programs.cpp — program builds (asynchronous where the driver allows),
// kernels and their parameter access.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <tuple>

#include "engine/engine_impl.hpp"
#include "engine/param_check.hpp"

namespace uvcl {

namespace {

constexpr const char* kSeedOptions = "-cl-finite-math-only -cl-no-signed-zeros -cl-mad-enable -cl-kernel-arg-info";

void CL_CALLBACK on_build_notify(cl_program, void* token) {
  loop::wake(reinterpret_cast<std::uintptr_t>(token));
}

// Size of an OpenCL C scalar or vector type as the compiler names it;
// 0 when unknown (the size is then not checked).
std::size_t type_size(std::string name) {
  for (const char* prefix : {"const ", "volatile ", "unsigned "}) {
    const std::string p = prefix;
    if (name.rfind(p, 0) == 0) {
      if (p == "unsigned ") name = "u" + name.substr(p.size());
      else name = name.substr(p.size());
    }
  }
  std::size_t digits = name.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(name[digits - 1]))) --digits;
  std::size_t lanes = 1;
  if (digits < name.size()) {
    lanes = std::stoul(name.substr(digits));
    if (lanes == 3) lanes = 4;  // 3-vectors occupy 4 lanes
    name.resize(digits);
  }
  if (auto t = scalar_type_from_name(name)) return scalar_size(*t) * lanes;
  if (name == "uchar" || name == "bool") return lanes;
  return 0;
}

}  // namespace

Result<Program> Engine::compile(std::size_t device, const std::string& source, const std::string& options,
                                BuildCallback on_built) {
  Impl& e = *impl_;
  auto usable = e.usable_device(device, "compile");
  if (!usable) return std::move(usable).error();
  if (source.empty()) return Error{Status::InvalidArgument, "compile: source must not be empty"};
  if (e.config.debug_asm) std::fprintf(stderr, "uvcl: compiling for device %zu:\n%s\n", device, source.c_str());
  const std::uint64_t id = e.next_handle++;
  ProgramRec& p = e.programs[id];
  p.device = static_cast<std::uint32_t>(device);
  p.on_built = std::move(on_built);
  p.source = source;
  p.options = options.empty() ? kSeedOptions : std::string(kSeedOptions) + " " + options;
  p.build_start_ns = uv_hrtime();
  if (e.cache) {
    const DeviceInfo& info = usable.value()->dev.info;
    p.cache_key = e.cache->key(info.platform_name + " " + info.platform_version, info.name, info.driver_version,
                               p.options, source);
  }
  if (e.memo) {
    if (auto hit = e.memo->find(p.device, p.options, source);
        hit && e.api->clRetainProgram(static_cast<cl_program>(hit->program)) == CL_SUCCESS) {
      // Built already: poll_builds runs on_built from the loop, as for a build.
      p.program = static_cast<cl_program>(hit->program);
      p.cached = *hit->kernels;
      p.build = ProgramRec::Build::Built;
      ++e.counters.program_memo_hits;
      e.building.push_back(id);
      e.update_busy();
      return Program{id};
    }
    ++e.counters.program_memo_misses;
  }
  cl_int rc = e.start_build(p, true);
  if (rc != CL_SUCCESS) {
    const bool created = p.program != nullptr;
    Error err = cl::call_error(Status::KernelCompilation, created ? "clBuildProgram" : "clCreateProgramWithSource", rc);
    if (!created) {
      e.programs.erase(id);
      return err;
    }
    p.build = ProgramRec::Build::Failed;
    p.error = std::move(err);
  }
  e.building.push_back(id);
  e.update_busy();
  return Program{id};
}

// Creates the program (from a cached binary when there is a valid one) and
// starts its build. With a notify callback a driver may build
// asynchronously; either way poll_builds reads the status and on_built runs
// from the loop.
cl_int Engine::Impl::start_build(ProgramRec& p, bool from_cache) {
  DeviceCtx& d = *devices[p.device];
  cl_int rc = CL_SUCCESS;
  if (p.program) api->clReleaseProgram(p.program);
  p.program = nullptr;
  p.from_binary = false;
  if (from_cache && cache && p.cache_key) {
    if (auto entry = cache->load(*p.cache_key)) {
      const unsigned char* bin = entry->binary.data();
      const std::size_t len = entry->binary.size();
      cl_int bin_status = CL_SUCCESS;
      cl_program prog = api->clCreateProgramWithBinary(d.context, 1, &d.dev.id, &len, &bin, &bin_status, &rc);
      if (rc == CL_SUCCESS && bin_status == CL_SUCCESS) {
        p.program = prog;
        p.from_binary = true;
        p.cached = std::move(entry->kernels);
      } else if (prog) {
        api->clReleaseProgram(prog);
      }
    }
  }
  if (!p.program) {
    const char* src = p.source.c_str();
    const std::size_t len = p.source.size();
    p.program = api->clCreateProgramWithSource(d.context, 1, &src, &len, &rc);
    if (rc != CL_SUCCESS) {
      p.program = nullptr;
      return rc;
    }
  }
  rc = api->clBuildProgram(p.program, 1, &d.dev.id, p.options.c_str(), on_build_notify,
                           reinterpret_cast<void*>(handles->wake_token()));
  if (rc == CL_BUILD_PROGRAM_FAILURE || rc == CL_INVALID_BINARY) rc = CL_SUCCESS;  // poll_builds reads the log
  return rc;
}

// Best effort: the binary and every kernel's parameter info.
void Engine::Impl::store_in_cache(ProgramRec& p) {
  std::size_t size = 0;
  if (api->clGetProgramInfo(p.program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS ||
      size == 0)
    return;
  CacheEntry entry;
  entry.binary.resize(size);
  unsigned char* ptr = entry.binary.data();
  if (api->clGetProgramInfo(p.program, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS) return;
  std::size_t names_size = 0;
  std::string names;
  if (api->clGetProgramInfo(p.program, CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &names_size) != CL_SUCCESS) return;
  names.resize(names_size);
  api->clGetProgramInfo(p.program, CL_PROGRAM_KERNEL_NAMES, names_size, names.data(), nullptr);
  while (!names.empty() && names.back() == '\0') names.pop_back();
  std::size_t start = 0;
  while (start < names.size()) {
    std::size_t end = names.find(';', start);
    if (end == std::string::npos) end = names.size();
    const std::string name = names.substr(start, end - start);
    start = end + 1;
    if (name.empty()) continue;
    cl_int rc = CL_SUCCESS;
    KernelRec k;
    k.device = p.device;
    k.kernel = api->clCreateKernel(p.program, name.c_str(), &rc);
    if (rc != CL_SUCCESS) return;
    const bool ok = query_params(k, nullptr).ok();
    api->clReleaseKernel(k.kernel);
    if (!ok) return;
    entry.kernels.push_back(CachedKernel{name, std::move(k.params)});
  }
  const bool stored = cache->store(*p.cache_key, entry);
  if (config.debug_backends)
    std::fprintf(stderr, "uvcl: program cache: %s %s\n", stored ? "stored" : "could not store",
                 p.cache_key->file.c_str());
}

void Engine::Impl::poll_builds() {
  for (std::size_t i = 0; i < building.size();) {
    const std::uint64_t id = building[i];
    ProgramRec& p = programs.at(id);
    cl_device_id dev = devices[p.device]->dev.id;
    if (p.build == ProgramRec::Build::Building) {
      cl_build_status status = CL_BUILD_IN_PROGRESS;
      cl_int rc = api->clGetProgramBuildInfo(p.program, dev, CL_PROGRAM_BUILD_STATUS, sizeof status, &status,
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
        if (cache && p.cache_key && !p.from_binary) store_in_cache(p);
        if (memo && memo->capacity() > 0 && api->clRetainProgram(p.program) == CL_SUCCESS)
          memo->insert(p.device, p.options, p.source, p.program, p.cached);
      } else if (p.from_binary) {
        // A cached binary this driver will not build: build the source.
        if (start_build(p, false) == CL_SUCCESS) {
          ++i;
          continue;
        }
        p.build = ProgramRec::Build::Failed;
        p.error = Error{Status::KernelCompilation, "clBuildProgram: rebuilding from source failed"};
      } else {
        std::size_t size = 0;
        std::string log;
        if (api->clGetProgramBuildInfo(p.program, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) == CL_SUCCESS &&
            size > 0) {
          log.resize(size);
          api->clGetProgramBuildInfo(p.program, dev, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
          while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
        }
        p.build = ProgramRec::Build::Failed;
        p.error = Error{Status::KernelCompilation,
                        "clBuildProgram: CL_BUILD_PROGRAM_FAILURE on device " + std::to_string(p.device) +
                            "; build log:\n" + log};
      }
    }
    building[i] = building.back();
    building.pop_back();
    p.source.clear();
    p.source.shrink_to_fit();
    if (config.debug_backends)
      std::fprintf(stderr, "uvcl: program %llu built in %.1f ms (%s)\n", static_cast<unsigned long long>(id),
                   static_cast<double>(uv_hrtime() - p.build_start_ns) / 1e6,
                   p.from_binary ? "cached binary" : "source");
    BuildCallback cb = std::move(p.on_built);
    Result<void> r;
    if (p.build == ProgramRec::Build::Failed) r = *p.error;
    if (cb) in_user_callback(*this, [&] { cb(std::move(r)); });
    maybe_free_program(id);  // released before on_built ran
  }
}

Result<Kernel> Engine::kernel(Program prog, const std::string& entry, std::vector<ParamAccess> declared) {
  Impl& e = *impl_;
  auto it = e.programs.find(prog.id);
  if (it == e.programs.end() || it->second.released)
    return Error{Status::InvalidArgument, "kernel: program " + std::to_string(prog.id) + " is not a live program"};
  if (entry.empty()) return Error{Status::InvalidArgument, "kernel: the entry point name must not be empty"};
  ProgramRec& p = it->second;
  if (p.build == ProgramRec::Build::Building)
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
  if (auto q = e.query_params(rec, cached); !q) {
    e.api->clReleaseKernel(k);
    return std::move(q).error().context("kernel " + entry);
  }
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
  }
  const std::uint64_t id = e.next_handle++;
  e.kernels.emplace(id, std::move(rec));
  ++p.kernels;
  return Kernel{id};
}

Result<void> Engine::Impl::query_params(KernelRec& k, const CachedKernel* cached) {
  cl_int rc = api->clGetKernelWorkGroupInfo(k.kernel, devices[k.device]->dev.id, CL_KERNEL_WORK_GROUP_SIZE,
                                            sizeof k.max_work_group, &k.max_work_group, nullptr);
  if (rc != CL_SUCCESS) k.max_work_group = devices[k.device]->dev.info.max_work_group_size;
  if (cached) {  // argument info is only guaranteed for programs built from source
    k.params = cached->params;
    return {};
  }
  cl_uint n = 0;
  rc = api->clGetKernelInfo(k.kernel, CL_KERNEL_NUM_ARGS, sizeof n, &n, nullptr);
  if (rc != CL_SUCCESS) return cl::call_error(Status::KernelCompilation, "clGetKernelInfo(CL_KERNEL_NUM_ARGS)", rc);
  for (cl_uint i = 0; i < n; ++i) {
    KernelParam param;
    cl_kernel_arg_address_qualifier addr = CL_KERNEL_ARG_ADDRESS_PRIVATE;
    cl_kernel_arg_type_qualifier tq = 0;
    rc = api->clGetKernelArgInfo(k.kernel, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof addr, &addr, nullptr);
    if (rc != CL_SUCCESS)
      return cl::call_error(Status::KernelCompilation, "clGetKernelArgInfo(CL_KERNEL_ARG_ADDRESS_QUALIFIER)", rc);
    // A failed query must not guess: a const input taken as written, or a
    // scalar of unknown size, would change what the launch does.
    rc = api->clGetKernelArgInfo(k.kernel, i, CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof tq, &tq, nullptr);
    if (rc != CL_SUCCESS)
      return cl::call_error(Status::KernelCompilation, "clGetKernelArgInfo(CL_KERNEL_ARG_TYPE_QUALIFIER)", rc);
    for (auto [what, label, out] :
         {std::tuple{CL_KERNEL_ARG_TYPE_NAME, "clGetKernelArgInfo(CL_KERNEL_ARG_TYPE_NAME)", &param.type_name},
          std::tuple{CL_KERNEL_ARG_NAME, "clGetKernelArgInfo(CL_KERNEL_ARG_NAME)", &param.name}}) {
      std::size_t size = 0;
      rc = api->clGetKernelArgInfo(k.kernel, i, what, 0, nullptr, &size);
      if (rc == CL_SUCCESS && size > 0) {
        out->resize(size);
        rc = api->clGetKernelArgInfo(k.kernel, i, what, size, out->data(), nullptr);
        while (!out->empty() && out->back() == '\0') out->pop_back();
      }
      if (rc != CL_SUCCESS) return cl::call_error(Status::KernelCompilation, label, rc);
    }
    switch (addr) {
      case CL_KERNEL_ARG_ADDRESS_GLOBAL:
        param.access = (tq & CL_KERNEL_ARG_TYPE_CONST) ? ParamAccess::ReadOnly : ParamAccess::Written;
        break;
      case CL_KERNEL_ARG_ADDRESS_CONSTANT: param.access = ParamAccess::ReadOnly; break;
      case CL_KERNEL_ARG_ADDRESS_LOCAL: param.access = ParamAccess::Local; break;
      default:
        param.access = ParamAccess::Scalar;
        param.scalar_size = type_size(param.type_name);
        break;
    }
    k.params.push_back(std::move(param));
  }
  return {};
}

Result<std::vector<KernelParam>> Engine::kernel_params(Kernel k) const {
  auto it = impl_->kernels.find(k.id);
  if (it == impl_->kernels.end() || it->second.released)
    return Error{Status::InvalidArgument, "kernel_params: kernel " + std::to_string(k.id) + " is not a live kernel"};
  return it->second.params;
}

Result<void> Engine::release(Program p) {
  Impl& e = *impl_;
  auto it = e.programs.find(p.id);
  if (it == e.programs.end() || it->second.released)
    return Error{Status::InvalidArgument, "release: program " + std::to_string(p.id) + " is not a live program"};
  // Still building, or built with on_built not yet run: freed once on_built
  // has run (poll_builds), which it still does, exactly once.
  it->second.released = true;
  e.maybe_free_program(p.id);
  return {};
}

Result<void> Engine::release(Kernel k) {
  Impl& e = *impl_;
  auto it = e.kernels.find(k.id);
  if (it == e.kernels.end() || it->second.released)
    return Error{Status::InvalidArgument, "release: kernel " + std::to_string(k.id) + " is not a live kernel"};
  it->second.released = true;
  e.maybe_free_kernel(k.id);
  return {};
}

// Deferred while launches use it: the seed used a released program after free.
void Engine::Impl::maybe_free_kernel(std::uint64_t id) {
  auto it = kernels.find(id);
  if (it == kernels.end() || !it->second.released || it->second.uses > 0) return;
  const std::uint64_t program = it->second.program;
  api->clReleaseKernel(it->second.kernel);
  kernels.erase(it);
  auto p = programs.find(program);
  if (p != programs.end()) {
    --p->second.kernels;
    maybe_free_program(program);
  }
}

void Engine::Impl::maybe_free_program(std::uint64_t id) {
  auto it = programs.find(id);
  if (it == programs.end() || !it->second.released || it->second.kernels > 0) return;
  if (std::find(building.begin(), building.end(), id) != building.end()) return;  // on_built still to run
  api->clReleaseProgram(it->second.program);
  programs.erase(it);
}

}  // namespace uvcl
