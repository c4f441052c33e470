// compilers.cpp — builds in compiler processes: which process builds what,
// their results and failures, and the inline fallback.
//
// Each device has up to opencl.compilers uvcl-compiler processes
// (compiler_process.hpp), started on first need and ended when idle. A
// compile that neither the memo nor opencl.cache_dir answers waits in the
// device's queue for an idle process. A result is only recorded here (the
// binary, or the failure) and the loop woken: poll_builds loads the binary
// and runs on_built from the engine's own step, as for any build.
#include <unistd.h>

#include <cstdio>

#include "engine/compiler_path.hpp"
#include "engine/engine_impl.hpp"

namespace uvcl {

bool Programs::build_in_process(std::uint64_t id, ProgramRec& p) {
  DeviceCompilers& dc = e.devices[p.device]->compilers;
  if (e.config.compile == CompileMode::Inline || dc.inline_only) return false;
  // The Build frame's length field would not hold it (the compiler refuses
  // a frame beyond kMaxPayload): an error here, named, not a broken stream.
  const std::size_t payload = 8 + 4 + p.options.size() + 4 + p.source.size();
  if (payload > compiler::kMaxPayload) {
    p.build = ProgramRec::Build::Failed;
    p.error = Error{Status::KernelCompilation,
                    "program " + std::to_string(id) + ": the source (" + std::to_string(p.source.size()) +
                        " bytes) and its options exceed the compiler process's frame limit of " +
                        std::to_string(compiler::kMaxPayload) + " bytes"};
    loop::wake(e.handles->wake_token());
    return true;
  }
  p.build = ProgramRec::Build::Queued;
  dc.waiting.push_back(id);
  dispatch_builds(dc);
  return true;
}

void Programs::dispatch_builds(DeviceCompilers& dc) {
  while (!dc.waiting.empty() && !dc.inline_only) {
    CompilerProcess* idle = nullptr;
    for (CompilerProcess* c : dc.processes)
      if (!c->busy()) idle = c;
    if (!idle) {
      if (dc.processes.size() >= e.config.compilers) return;  // the rest wait for one to finish
      if (!compiler_path) {
        compiler_path = "";
        for (const std::string& path : compiler_candidates(e.config))
          if (::access(path.c_str(), X_OK) == 0) {
            compiler_path = path;
            break;
          }
      }
      if (compiler_path->empty()) {
        std::string tried;
        for (const std::string& path : compiler_candidates(e.config)) tried += (tried.empty() ? "" : ", ") + path;
        return fall_back_to_inline(dc, "no executable uvcl-compiler (tried " + tried + ")");
      }
      const DeviceCtx& d = *e.devices[dc.device];
      std::size_t in_platform = 0;  // the device's index within its platform, as the compiler enumerates
      for (std::uint32_t i = 0; i < dc.device; ++i)
        if (e.devices[i]->dev.info.platform_index == d.dev.info.platform_index) ++in_platform;
      CompilerProcess::Settings s;
      s.path = *compiler_path;
      s.args = {"--platform", std::to_string(d.dev.info.platform_index), "--device", std::to_string(in_platform),
                "--name", d.dev.info.name, "--driver", d.dev.info.driver_version};
      if (!e.config.library.empty()) s.args.insert(s.args.end(), {"--library", e.config.library});
      s.timeout_ms = e.config.compile_timeout_ms;
      s.idle_ms = e.config.compiler_idle_ms;
      auto started = CompilerProcess::spawn(e.loop, s, &dc);
      if (!started) return fall_back_to_inline(dc, started.error().message);
      ++e.counters.compiler_starts;
      idle = started.value();
      dc.processes.push_back(idle);
      if (e.config.debug_backends)
        std::fprintf(stderr, "uvcl: device %u: started %s (pid %d)\n", dc.device, s.path.c_str(), idle->pid());
    }
    const std::uint64_t id = dc.waiting.front();
    dc.waiting.pop_front();
    ProgramRec& p = programs.at(id);
    p.build = ProgramRec::Build::InProcess;
    idle->build(compiler::BuildRequest{id, p.options, p.source});
  }
}

void Programs::fall_back_to_inline(DeviceCompilers& dc, const std::string& why) {
  if (!dc.inline_only) ++e.counters.compiler_fallbacks;
  dc.inline_only = true;
  // Said once per engine (each time with debug.backends): builds on the loop
  // thread are what the compiler process exists to avoid, and a missing
  // program (an installation moved without it) must not go unnoticed.
  if (e.config.debug_backends || !fallback_said) {
    fallback_said = true;
    std::fprintf(stderr,
                 "uvcl: device %u: the OpenCL compiler process cannot be used (%s): building inline, on the loop "
                 "thread\n",
                 dc.device, why.c_str());
  }
  while (!dc.waiting.empty()) {
    const std::uint64_t id = dc.waiting.front();
    dc.waiting.pop_front();
    ProgramRec& p = programs.at(id);
    if (const cl_int rc = start_build(p); rc != CL_SUCCESS) {
      p.build = ProgramRec::Build::Failed;
      p.error = cl::call_error(Status::KernelCompilation, p.program ? "clBuildProgram" : "clCreateProgramWithSource",
                               rc);
    }
  }
  loop::wake(e.handles->wake_token());  // poll_builds reports them
}

void Programs::close_compilers() {
  for (const auto& d : e.devices) {
    for (CompilerProcess* c : d->compilers.processes) c->close();
    d->compilers.processes.clear();
    d->compilers.waiting.clear();
  }
}

void DeviceCompilers::on_result(CompilerProcess&, compiler::BuildResult result) {
  Engine::Impl& e = *engine;
  ++e.counters.process_builds;
  auto it = e.progs.programs.find(result.program);
  if (it != e.progs.programs.end() && it->second.build == ProgramRec::Build::InProcess) {
    ProgramRec& p = it->second;
    using Outcome = compiler::BuildResult::Outcome;
    if (result.outcome == Outcome::Built) {
      p.binary = std::move(result.binary);
      p.cached = std::move(result.kernels);
      p.build = ProgramRec::Build::Received;
    } else {
      p.build = ProgramRec::Build::Failed;
      p.error = result.outcome == Outcome::BuildFailed
                    ? build_log_error(device, result.log, false)
                    : Error{Status::KernelCompilation, "the OpenCL compiler, building program " +
                                                           std::to_string(result.program) + ": " + result.log};
    }
    loop::wake(e.handles->wake_token());
  }
  e.progs.dispatch_builds(*this);
}

void DeviceCompilers::on_lost(CompilerProcess& c, CompilerProcess::Lost how, std::uint64_t program,
                              const Error& why) {
  Engine::Impl& e = *engine;
  std::erase(processes, &c);
  auto it = program != 0 ? e.progs.programs.find(program) : e.progs.programs.end();
  const bool in_flight = it != e.progs.programs.end() && it->second.build == ProgramRec::Build::InProcess;
  if (how == CompilerProcess::Lost::Unavailable) {
    if (in_flight) waiting.push_front(program);  // built inline, with the others
    e.progs.fall_back_to_inline(*this, why.message);
    return;
  }
  if (in_flight) {
    ++e.counters.compiler_failures;
    it->second.build = ProgramRec::Build::Failed;
    it->second.error = why;
    loop::wake(e.handles->wake_token());
  }
  e.progs.dispatch_builds(*this);  // a new process for the next build, if one waits
}

}  // namespace uvcl
