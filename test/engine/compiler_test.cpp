// Builds in the compiler process (opencl.compile "process", the default):
// real PoCL, the real uvcl-compiler, and stand-ins (shell scripts) for a
// compiler that breaks the protocol or cannot start.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <uv.h>

#include "../child_process.hpp"
#include "../watchdog.hpp"
#include "compiler/protocol.hpp"
#include "engine/compiler_path.hpp"
#include "program/job_runner.hpp"
#include "engine_fixture.hpp"
#include "program/job.hpp"

namespace uvcl::testing::compiler_tests {

// Unique per call: neither PoCL's kernel cache nor the memo answers it. A
// declaration, not a comment: PoCL's cache hashes the preprocessed source.
std::string nonce() {
  static int n = 0;
  return "__constant ulong uvcl_test_nonce_" + std::to_string(++n) + " = " + std::to_string(uv_hrtime()) + "UL + " +
         std::to_string(::getpid()) + "UL;\n";
}

// The issue's 534-byte source, shortened to 17 levels: each level doubles
// the expansion, and PoCL 3.1's compiler overflows its stack on it (SIGSEGV
// here; 15 levels are enough on this machine).
std::string crashing_source() {
  std::string s = nonce() + "#define A0 1+\n";
  for (int i = 1; i <= 17; ++i)
    s += "#define A" + std::to_string(i) + " A" + std::to_string(i - 1) + " A" + std::to_string(i - 1) + "\n";
  return s + "__kernel void k(__global int* o) { o[0] = A17 1; }\n";
}

// A build of seconds on PoCL: a fully unrolled loop (8000 iterations add
// about 2.5 s to a cold build on 2 cores).
std::string slow_source(int iterations) {
  return nonce() + "__kernel void slow(__global float* o) {\n  float x = o[0];\n  #pragma unroll\n  for (int i = 0; i < " +
         std::to_string(iterations) + "; ++i) x = x * o[i & 7] + o[(i * 7) & 15];\n  o[0] = x;\n}\n";
}

// The children of this process, zombies included.
std::vector<int> children() {
  std::vector<int> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const std::size_t paren = text.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(text.substr(paren + 1));
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == ::getpid()) out.push_back(std::stoi(name));
  }
  return out;
}

// An executable script in the test's temporary folder.
std::string script(const std::string& name, const std::string& body) {
  const std::string path = ::testing::TempDir() + "uvcl_compiler_test_" + name + "_" + std::to_string(::getpid());
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

// The real uvcl-compiler, found as the engine finds it.
std::string real_compiler() {
  for (const std::string& path : uvcl::compiler_candidates(uvcl::Config{}))
    if (::access(path.c_str(), X_OK) == 0) return path;
  return {};
}

constexpr const char* kReady = R"(printf '\001\000\000\000\000\000\000\000')";

class CompilerProcessTest : public EngineTest {
 protected:
  void SetUp() override { make_engine(config()); }
  static Config config() {
    Config c = test_config();
    c.compile = CompileMode::Process;
    return c;
  }
  // compile_sync's error message ("" when it built).
  std::string compile_error(const std::string& source) {
    auto p = eng().compile_sync(0, source);
    if (p) return "";
    EXPECT_EQ(p.status(), Status::KernelCompilation) << p.error().message;
    return p.error().message;
  }
};

TEST_F(CompilerProcessTest, BuildsAndKernelsBehaveAsInline) {
  Watchdog dog("BuildsAndKernelsBehaveAsInline", 120);
  const std::string source = nonce() + kTwiceKernel +
                             "__kernel void mixed(__global const float* a, __constant int* c, __global float* out, "
                             "__local float* tmp, uint n, float4 s) { out[0] = a[0] + c[0] + s.x; }\n";
  Kernel k = kernel(compile(source), "twice");
  const EngineStats s = eng().stats();
  EXPECT_EQ(s.process_builds, 1u);
  EXPECT_EQ(s.inline_builds, 0u);
  EXPECT_EQ(s.compiler_starts, 1u);
  std::vector<int> v{1, 2, 3, 4};
  Buffer buf = upload(v);
  ASSERT_TRUE(eng().launch(Launch{k, {KernelArg::of(buf), KernelArg::value<std::uint32_t>(4)}, {4}, {}}).ok());
  EXPECT_EQ(download<int>(buf, 4), (std::vector<int>{2, 4, 6, 8}));

  // Parameter info came with the binary and equals an inline build's.
  auto params = eng().kernel_params(kernel(compile(source), "mixed"));
  ASSERT_TRUE(params.ok());
  Config inline_config = config();
  inline_config.compile = CompileMode::Inline;
  auto other = Engine::create(inline_config);
  ASSERT_TRUE(other.ok());
  auto ip = (*other)->compile_sync(0, source);
  ASSERT_TRUE(ip.ok()) << ip.error().message;
  auto ik = (*other)->kernel(ip.value(), "mixed");
  ASSERT_TRUE(ik.ok());
  auto inline_params = (*other)->kernel_params(ik.value());
  EXPECT_EQ((*other)->stats().inline_builds, 1u);
  EXPECT_EQ((*other)->stats().compiler_starts, 0u);
  ASSERT_EQ(params->size(), 6u);
  ASSERT_EQ(inline_params->size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ((*params)[i].name, (*inline_params)[i].name);
    EXPECT_EQ((*params)[i].type_name, (*inline_params)[i].type_name);
    EXPECT_EQ((*params)[i].access, (*inline_params)[i].access);
    EXPECT_EQ((*params)[i].scalar_size, (*inline_params)[i].scalar_size);
    EXPECT_EQ((*params)[i].writes_each_item, (*inline_params)[i].writes_each_item);
  }
  EXPECT_EQ((*params)[0].access, ParamAccess::ReadOnly);
  EXPECT_EQ((*params)[1].access, ParamAccess::ReadOnly);
  EXPECT_EQ((*params)[2].access, ParamAccess::WriteOnly);  // only stored to (`out[0] = ...`): from the source
  EXPECT_EQ((*params)[3].access, ParamAccess::Local);
  EXPECT_EQ((*params)[4].scalar_size, 4u);
  EXPECT_EQ((*params)[5].scalar_size, 16u);
}

TEST_F(CompilerProcessTest, BuildErrorCarriesItsLog) {
  Watchdog dog("BuildErrorCarriesItsLog", 120);
  const std::string err = compile_error(nonce() + "__kernel void bad(__global int* a) { a[0] = undeclared_name; }\n");
  EXPECT_NE(err.find("CL_BUILD_PROGRAM_FAILURE on device 0; build log:"), std::string::npos) << err;
  EXPECT_NE(err.find("undeclared_name"), std::string::npos) << err;
  EXPECT_EQ(eng().stats().process_builds, 1u);
  EXPECT_EQ(eng().stats().compiler_failures, 0u);
  EXPECT_EQ(compile_error(nonce() + kTwiceKernel), "");  // the same process builds the next one
  EXPECT_EQ(eng().stats().compiler_starts, 1u);
}

TEST_F(CompilerProcessTest, CrashIsAnErrorAndTheNextCompileWorks) {
  Watchdog dog("CrashIsAnErrorAndTheNextCompileWorks", 180);
  bool built = false;
  Result<void> result;
  auto p = eng().compile(0, crashing_source(), "", [&](Result<void> r) {
    built = true;
    result = std::move(r);
  });
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(eng().run_until([&] { return built; }).ok());
  ASSERT_FALSE(result.ok());
  const std::string rest = ") while building program " + std::to_string(p->id) + "; the source is not built";
#if defined(__SANITIZE_ADDRESS__)
  // Under ASan (abort_on_error=1) the child's sanitizer turns the overflow
  // into an abort.
  const bool aborted = result.error().message == "the OpenCL compiler crashed (SIGABRT" + rest;
#else
  const bool aborted = false;
#endif
  if (!aborted) {
    EXPECT_EQ(result.error().message, "the OpenCL compiler crashed (SIGSEGV" + rest);
  }
  EXPECT_EQ(eng().stats().compiler_failures, 1u);
  EXPECT_FALSE(eng().kernel(p.value(), "k").ok());
  // The engine goes on: a new process builds the next source.
  Kernel k = kernel(compile(nonce() + kTwiceKernel), "twice");
  std::vector<int> v{5};
  Buffer buf = upload(v);
  ASSERT_TRUE(eng().launch(Launch{k, {KernelArg::of(buf), KernelArg::value<std::uint32_t>(1)}, {1}, {}}).ok());
  EXPECT_EQ(download<int>(buf, 1), (std::vector<int>{10}));
  EXPECT_EQ(eng().stats().compiler_starts, 2u);
}

TEST_F(CompilerProcessTest, BuildPastItsTimeoutIsKilledAndReported) {
  Watchdog dog("BuildPastItsTimeoutIsKilledAndReported", 180);
  // The next build must fit the short timeout: PoCL's kernel cache holds it.
  Config warm = config();
  warm.compile = CompileMode::Inline;
  {
    auto e = Engine::create(warm);
    ASSERT_TRUE(e.ok());
    ASSERT_TRUE((*e)->compile_sync(0, kTwiceKernel).ok());
  }
  Config c = config();
  c.compile_timeout_ms = 2000;
  make_engine(c);
  auto p = eng().compile_sync(0, slow_source(32000));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("the OpenCL compiler took longer than opencl.compile_timeout_ms (2000 ms) "
                                   "building program "),
            std::string::npos)
      << p.error().message;
  EXPECT_NE(p.error().message.find(": it was killed; the source is not built"), std::string::npos)
      << p.error().message;
  EXPECT_EQ(eng().stats().compiler_failures, 1u);
  EXPECT_EQ(compile_error(kTwiceKernel), "");  // a restarted process
  EXPECT_EQ(eng().stats().compiler_starts, 2u);
}

TEST_F(CompilerProcessTest, TimerKeepsFiringDuringASlowBuild) {
  Watchdog dog("TimerKeepsFiringDuringASlowBuild", 180);
  // Ticks of a repeating 1 ms timer between compile() and on_built: counted,
  // not timed. In a compiler process the loop is free while PoCL builds;
  // inline, the build holds the loop for all of it.
  auto ticks_during_build = [](Engine& e) {
    struct Counter {
      uv_timer_t timer{};
      int ticks = 0;
      bool built = false;
    } c;
    uv_timer_init(e.loop(), &c.timer);
    c.timer.data = &c;
    uv_timer_start(&c.timer, [](uv_timer_t* t) {
      auto* self = static_cast<Counter*>(t->data);
      if (!self->built) ++self->ticks;
    }, 1, 1);
    auto p = e.compile(0, slow_source(2000), "", [&c](Result<void> r) {
      EXPECT_TRUE(r.ok()) << r.error().message;
      c.built = true;
    });
    EXPECT_TRUE(p.ok());
    EXPECT_TRUE(e.run_until([&c] { return c.built; }).ok());
    uv_close(reinterpret_cast<uv_handle_t*>(&c.timer), nullptr);
    uv_run(e.loop(), UV_RUN_NOWAIT);  // its close callback
    return c.ticks;
  };
  const int in_process = ticks_during_build(eng());
  EXPECT_GE(in_process, 20) << "the loop was held during the build";
  Config c = config();
  c.compile = CompileMode::Inline;
  make_engine(c);
  EXPECT_LE(ticks_during_build(eng()), 3);
}

TEST_F(CompilerProcessTest, WarmCompilesNeverReachTheProcess) {
  Watchdog dog("WarmCompilesNeverReachTheProcess", 120);
  const std::string source = nonce() + kTwiceKernel;
  compile(source);
  compile(source);  // the memo
  EXPECT_EQ(eng().stats().program_memo_hits, 1u);
  EXPECT_EQ(eng().stats().process_builds, 1u);
  // opencl.cache_dir: a new engine loads the binary the process built.
  const std::string dir = ::testing::TempDir() + "uvcl_compiler_cache_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  Config c = config();
  c.cache_dir = dir;
  make_engine(c);
  compile(source);
  EXPECT_EQ(eng().stats().process_builds, 1u);
  make_engine(c);
  Kernel k = kernel(compile(source), "twice");
  EXPECT_EQ(eng().stats().process_builds, 0u);
  EXPECT_EQ(eng().stats().compiler_starts, 0u);
  auto params = eng().kernel_params(k);  // stored with the binary
  ASSERT_TRUE(params.ok());
  ASSERT_EQ(params->size(), 2u);
  EXPECT_EQ((*params)[0].access, ParamAccess::Written);
  std::filesystem::remove_all(dir);
}

TEST_F(CompilerProcessTest, CompilesOfOneDeviceQueueUpToTheProcessCount) {
  Watchdog dog("CompilesOfOneDeviceQueueUpToTheProcessCount", 180);
  for (unsigned processes : {1u, 2u}) {
    Config c = config();
    c.compilers = processes;
    make_engine(c);
    int built = 0;
    const std::string source = nonce() + kTwiceKernel;  // the memo does not join builds in flight
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(eng().compile(0, source, "", [&built](Result<void> r) {
        EXPECT_TRUE(r.ok()) << r.error().message;
        ++built;
      }).ok());
    ASSERT_TRUE(eng().run_until([&built] { return built == 3; }).ok());
    EXPECT_EQ(eng().stats().compiler_starts, processes);
    EXPECT_EQ(eng().stats().process_builds, 3u);
  }
}

TEST_F(CompilerProcessTest, BuildOptionsCanBeReplaced) {
  Watchdog dog("BuildOptionsCanBeReplaced", 120);
  // clang defines __FINITE_MATH_ONLY__ as 1 under -cl-finite-math-only, one
  // of the default opencl.build_options, and as 0 without it.
  const std::string source = nonce() +
                             "__kernel void inf(__global const float* x, __global int* out) {\n"
                             "  out[0] = __FINITE_MATH_ONLY__ ? 0 : 1 + (int)x[0];\n}\n";
  auto run = [&](BuildOptionsMode mode, const std::string& options) {
    auto p = eng().compile_sync(0, source, options, mode);
    EXPECT_TRUE(p.ok()) << p.error().message;
    if (!p) return -1;
    Kernel k = kernel(p.value(), "inf");
    Buffer x = upload(std::vector<float>{0.0f});
    Buffer out = upload(std::vector<int>{-1});
    EXPECT_TRUE(eng().launch(Launch{k, {KernelArg::of(x), KernelArg::of(out)}, {1}, {}}).ok());
    return download<int>(out, 1).at(0);
  };
  EXPECT_EQ(run(BuildOptionsMode::Add, ""), 0);  // with the default set
  EXPECT_NE(run(BuildOptionsMode::Replace, ""), 0);
  EXPECT_NE(run(BuildOptionsMode::Replace, "-cl-mad-enable"), 0);
  Config c = config();
  c.build_options = "";
  make_engine(c);
  EXPECT_NE(run(BuildOptionsMode::Add, ""), 0);
}

TEST_F(CompilerProcessTest, JobKernelBuildOptionsReplaceTheEngines) {
  Watchdog dog("JobKernelBuildOptionsReplaceTheEngines", 120);
  auto run = [&](const std::string& kernel_keys) {
    const std::string json =
        R"({"kernels": {"k": {"source": "#if __FINITE_MATH_ONLY__\n#error built with fast math\n#endif\n)"
        R"(__kernel void one(__global uint* x) { x[get_global_id(0)] = 1u; }\n", "entry": "one")" +
        kernel_keys + R"(}}, "buffers": {"x": {"type": "uint", "count": 4}},)"
        R"( "launches": [{"kernel": "k", "args": ["x"], "global": [4]}], "outputs": ["x"]})";
    auto j = job::parse_job(json, "job.json");
    EXPECT_TRUE(j.ok()) << j.error().message;
    return job::run_job_sync(eng(), std::move(j.value()), job::RunOptions{});
  };
  auto replaced = run(R"(, "build_options": "")");
  EXPECT_TRUE(replaced.ok()) << replaced.error().message;
  auto defaults = run("");
  ASSERT_FALSE(defaults.ok());
  EXPECT_NE(defaults.error().message.find("built with fast math"), std::string::npos) << defaults.error().message;
}

TEST_F(CompilerProcessTest, SourceBeyondTheFrameLimitIsAnError) {
  Watchdog dog("SourceBeyondTheFrameLimitIsAnError", 120);
  Config c = config();
  c.program_memo = 0;  // no memo key: one copy of the source fewer
  make_engine(c);
  std::string huge(compiler::kMaxPayload, ' ');
  huge += kTwiceKernel;
  const std::string err = compile_error(huge);
  EXPECT_NE(err.find(" bytes) and its options exceed the compiler process's frame limit of 268435456 bytes"),
            std::string::npos)
      << err.substr(0, 300);
  EXPECT_EQ(eng().stats().compiler_starts, 0u);
  EXPECT_EQ(compile_error(nonce() + kTwiceKernel), "");  // the next compile goes to the compiler
}

TEST_F(CompilerProcessTest, MissingCompilerFallsBackToInline) {
  Watchdog dog("MissingCompilerFallsBackToInline", 120);
  Config c = config();
  c.compiler = "/nonexistent/uvcl-compiler";
  c.debug_backends = true;
  make_engine(c);
  ::testing::internal::CaptureStderr();
  const std::string err = compile_error(nonce() + kTwiceKernel);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "");
  EXPECT_NE(said.find("uvcl: device 0: the OpenCL compiler process cannot be used (no executable uvcl-compiler "
                      "(tried /nonexistent/uvcl-compiler)): building inline"),
            std::string::npos)
      << said;
  EXPECT_EQ(eng().stats().inline_builds, 1u);
  EXPECT_EQ(eng().stats().compiler_starts, 0u);
  EXPECT_EQ(eng().stats().compiler_fallbacks, 1u);
  EXPECT_EQ(compile_error(nonce() + kTwiceKernel), "");  // and stays inline
  EXPECT_EQ(eng().stats().inline_builds, 2u);
  EXPECT_EQ(eng().stats().compiler_fallbacks, 1u);
}

// Without debug.backends the fallback is still said, once per engine, with
// the paths tried; opencl.compile "inline" is no fallback and says nothing.
TEST_F(CompilerProcessTest, FallbackIsSaidOncePerEngine) {
  Watchdog dog("FallbackIsSaidOncePerEngine", 120);
  Config c = config();
  c.compiler = "/nonexistent/uvcl-compiler";
  make_engine(c);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(compile_error(nonce() + kTwiceKernel), "");
  EXPECT_EQ(compile_error(nonce() + kTwiceKernel), "");
  const std::string said = ::testing::internal::GetCapturedStderr();
  const std::string line = "uvcl: device 0: the OpenCL compiler process cannot be used (no executable uvcl-compiler "
                           "(tried /nonexistent/uvcl-compiler)): building inline, on the loop thread\n";
  const std::size_t at = said.find(line);
  EXPECT_NE(at, std::string::npos) << said;
  EXPECT_EQ(said.find("cannot be used", at + line.size()), std::string::npos) << "said more than once:\n" << said;
  EXPECT_EQ(eng().stats().compiler_fallbacks, 1u);
  make_engine(c);  // a new engine says it again
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(compile_error(nonce() + kTwiceKernel), "");
  EXPECT_NE(::testing::internal::GetCapturedStderr().find(line), std::string::npos);
  c.compile = CompileMode::Inline;
  make_engine(c);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(compile_error(nonce() + kTwiceKernel), "");
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("cannot be used"), std::string::npos);
  EXPECT_EQ(eng().stats().compiler_fallbacks, 0u);
}

TEST_F(CompilerProcessTest, CompilerThatCannotStartFallsBackToInline) {
  Watchdog dog("CompilerThatCannotStartFallsBackToInline", 120);
  struct Case {
    std::string path, said;
  };
  const std::string real = real_compiler();
  ASSERT_EQ(::access(real.c_str(), X_OK), 0) << real;
  for (const Case& k : {Case{script("exits", "exit 3\n"), "uvcl-compiler exited with status 3 before it was ready"},
                        // The real compiler, told another device name: it refuses.
                        Case{script("wrong_device", "exec '" + real + "' \"$@\" --name 'another device'\n"),
                             "uvcl-compiler refused: device 0 of platform "}}) {
    Config c = config();
    c.compiler = k.path;
    c.debug_backends = true;
    make_engine(c);
    ::testing::internal::CaptureStderr();
    const std::string err = compile_error(nonce() + kTwiceKernel);
    const std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(err, "");
    EXPECT_NE(said.find(k.said), std::string::npos) << said;
    EXPECT_NE(said.find("building inline"), std::string::npos) << said;
    EXPECT_EQ(eng().stats().compiler_starts, 1u);
    EXPECT_EQ(eng().stats().inline_builds, 1u);
    EXPECT_EQ(eng().stats().compiler_fallbacks, 1u);
  }
}

TEST_F(CompilerProcessTest, ProtocolViolationsAreErrors) {
  Watchdog dog("ProtocolViolationsAreErrors", 120);
  struct Case {
    const char* name;
    std::string reply;  // what the stand-in writes once it has a build
    std::string said;
  };
  const Case cases[] = {
      {"unknown_type", R"(printf '\011\000\000\000\000\000\000\000')", "unknown frame type 9 (expected 1..4)"},
      {"huge_length", R"(printf '\004\000\000\000\377\377\377\377')",
       "frame length 4294967295 exceeds the limit of 268435456 bytes"},
      {"bad_payload", R"(printf '\004\000\000\000\003\000\000\000abc')", "a Result frame that does not decode"},
      {"second_ready", kReady, "an unexpected Ready frame"},
      {"build_frame", R"(printf '\003\000\000\000\000\000\000\000')", "a Build frame (only the engine sends those)"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    Config c = config();
    c.compiler = script(k.name, std::string(kReady) + "\nhead -c 8 >/dev/null\n" + k.reply + "\nexec cat >/dev/null\n");
    make_engine(c);
    for (int attempt = 1; attempt <= 2; ++attempt) {  // the engine goes on, and reports it again
      const std::string err = compile_error(nonce() + kTwiceKernel);
      EXPECT_NE(err.find("protocol violation by the OpenCL compiler (pid "), std::string::npos) << err;
      EXPECT_NE(err.find(") while building program "), std::string::npos) << err;
      EXPECT_NE(err.find(k.said + "; it was killed; the source is not built"), std::string::npos) << err;
      EXPECT_EQ(eng().stats().compiler_failures, static_cast<std::uint64_t>(attempt));
    }
  }
  engine_.reset();
  EXPECT_TRUE(children().empty());
}

TEST(CompilerProcessTeardown, CompileInFlightLeavesNoZombie) {
  Watchdog dog("CompileInFlightLeavesNoZombie", 120);
  for (bool callers_loop : {true, false}) {
    SCOPED_TRACE(callers_loop ? "caller's loop" : "engine's own loop");
    uv_loop_t loop;
    ASSERT_EQ(uv_loop_init(&loop), 0);
    Config c = test_config();
    c.compile = CompileMode::Process;
    auto created = Engine::create(c, callers_loop ? &loop : nullptr);
    ASSERT_TRUE(created.ok()) << created.error().message;
    std::unique_ptr<Engine> e = std::move(created.value());
    Status status = Status::Ok;
    ASSERT_TRUE(e->compile(0, slow_source(32000), "", [&status](Result<void> r) { status = r.status(); }).ok());
    // Let the process start and take the build.
    uv_timer_t stop{};
    uv_timer_init(e->loop(), &stop);
    uv_timer_start(&stop, [](uv_timer_t* t) { uv_stop(t->loop); }, 300, 0);
    uv_run(e->loop(), UV_RUN_DEFAULT);
    uv_close(reinterpret_cast<uv_handle_t*>(&stop), nullptr);
    uv_run(e->loop(), UV_RUN_NOWAIT);
    EXPECT_EQ(e->stats().compiler_starts, 1u);
    EXPECT_EQ(status, Status::Ok);  // still building
    EXPECT_EQ(children().size(), 1u);
    e.reset();
    EXPECT_EQ(status, Status::Cancelled);
    uv_run(&loop, UV_RUN_DEFAULT);  // the caller's loop: the close callbacks, the reaped child
    EXPECT_EQ(uv_loop_close(&loop), 0);
    EXPECT_TRUE(children().empty());
  }
}

// --- a host process with unusual fds 0-2 --------------------------------------
//
// Node.js marks its fd 2 close-on-exec; daemons close fds 0-2. The compiler
// process must still get a valid stderr and keep its protocol apart from it:
// when its fd 2 was missing, the protocol's descriptor landed there and the
// compiler's own diagnostics were read as frames ("unknown frame type ...").
// The disabled case runs in a child process (child_process.hpp) whose fds
// 0-2 UVCL_TEST_HOST_FDS sets up: "cloexec" or "closed".

constexpr const char* kHostFdsMode = "UVCL_TEST_HOST_FDS";

// A source the compiler warns about, new each time (no cache answers it):
// the warnings go to the compiler's stderr as well as into the build log.
std::string warning_source() {
  return nonce() +
         "#warning uvcl test: a warning from the compiler\n"
         "__kernel void warns(__global int* o) { int unused_here = 3; o[0] = 1; }\n";
}

TEST(CompilerHostFdsChild, DISABLED_BuildsWithWarnings) {
  if (std::getenv(child_process::kChildMarker) == nullptr) GTEST_SKIP() << "runs only as a child of CompilerHostFds tests";
  const char* mode_env = std::getenv(kHostFdsMode);
  const std::string mode = mode_env ? mode_env : "";
  ASSERT_TRUE(mode == "cloexec" || mode == "closed") << mode;
  Watchdog dog("CompilerHostFdsChild.BuildsWithWarnings (" + mode + ")", 240);
  // libuv asserts that it never closes one of fds 0-2 (uv__close), so the
  // loop's own descriptors are made first, while those are open: the
  // loop, its signal pipe, its async eventfd, the descriptor the first
  // stream reserves (emfile_fd), and the engine's timerfd.
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  uv_signal_t signal{};
  uv_async_t async{};
  uv_pipe_t pipe{};
  uv_signal_init(&loop, &signal);
  uv_async_init(&loop, &async, nullptr);
  uv_pipe_init(&loop, &pipe, 0);
  for (uv_handle_t* h : {reinterpret_cast<uv_handle_t*>(&signal), reinterpret_cast<uv_handle_t*>(&async),
                         reinterpret_cast<uv_handle_t*>(&pipe)})
    uv_close(h, nullptr);
  uv_run(&loop, UV_RUN_NOWAIT);
  Config c = test_config();
  c.compile = CompileMode::Process;
  auto created = Engine::create(c, &loop);
  ASSERT_TRUE(created.ok()) << created.error().message;
  std::unique_ptr<Engine> e = std::move(created.value());
  // Copies of fds 0-2 above them, to put back before anything is reported.
  int saved[3];
  for (int fd = 0; fd < 3; ++fd) ASSERT_GE(saved[fd] = ::fcntl(fd, F_DUPFD_CLOEXEC, 10), 0);
  for (int fd = 0; fd < 3; ++fd) {
    if (mode == "closed") ::close(fd);
    else ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  std::vector<std::string> errors;
  for (int i = 0; i < 4; ++i) {
    auto p = e->compile_sync(0, warning_source());
    errors.push_back(p ? "" : p.error().message);
  }
  const EngineStats stats = e->stats();
  e.reset();
  for (int fd = 0; fd < 3; ++fd) {
    ::dup2(saved[fd], fd);
    ::close(saved[fd]);
  }
  uv_run(&loop, UV_RUN_DEFAULT);  // the compiler's exit, the handles' close callbacks
  EXPECT_EQ(uv_loop_close(&loop), 0);
  for (std::size_t i = 0; i < errors.size(); ++i) EXPECT_EQ(errors[i], "") << "build " << i;
  EXPECT_EQ(stats.process_builds, 4u);
  EXPECT_EQ(stats.inline_builds, 0u);
  EXPECT_EQ(stats.compiler_failures, 0u);
}

void expect_host_fds_child_passed(const std::string& mode) {
  const auto c = child_process::spawn_child("CompilerHostFdsChild.*", {{kHostFdsMode, mode}}, std::chrono::seconds(300));
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("[       OK ] CompilerHostFdsChild.DISABLED_BuildsWithWarnings"), std::string::npos)
      << c.output;
}

TEST(CompilerHostFds, BuildsWithWarningsWhenTheHostsStdioIsCloseOnExec) { expect_host_fds_child_passed("cloexec"); }

TEST(CompilerHostFds, BuildsWithWarningsWhenTheHostsStdioIsClosed) { expect_host_fds_child_passed("closed"); }

TEST(CompilerProtocol, FramesAreCheckedWhereverTheStreamIsSplit) {
  compiler::BuildResult r;
  r.program = 42;
  r.outcome = compiler::BuildResult::Outcome::Built;
  r.log = "log";
  r.binary = {1, 2, 3};
  r.kernels = {cl::KernelInfo{"k", {KernelParam{"a", "float*", ParamAccess::ReadOnly, 0}}}};
  const std::string bytes = compiler::encode(r) + compiler::encode(compiler::Type::Ready, "");
  for (std::size_t split = 0; split <= bytes.size(); ++split) {
    compiler::FrameReader frames;
    frames.feed(bytes.data(), split);
    std::vector<compiler::Frame> got;
    auto drain = [&] {
      for (;;) {
        auto f = frames.next();
        ASSERT_TRUE(f.ok()) << f.error().message;
        if (!*f) return;
        got.push_back(std::move(**f));
      }
    };
    drain();
    frames.feed(bytes.data() + split, bytes.size() - split);
    drain();
    ASSERT_EQ(got.size(), 2u) << split;
    EXPECT_EQ(got[1].type, compiler::Type::Ready);
    auto back = compiler::decode_result(got[0].payload);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->program, 42u);
    EXPECT_EQ(back->binary, r.binary);
    ASSERT_EQ(back->kernels.size(), 1u);
    EXPECT_EQ(back->kernels[0].params.at(0).type_name, "float*");
  }
  // Every truncation and one byte too many fail to decode.
  const std::string payload = compiler::encode(r).substr(compiler::kHeaderBytes);
  for (std::size_t n = 0; n < payload.size(); ++n) EXPECT_FALSE(compiler::decode_result(payload.substr(0, n))) << n;
  EXPECT_FALSE(compiler::decode_result(payload + "x"));
  compiler::BuildRequest req{7, "-D A=1", "kernel void k() {}"};
  auto decoded = compiler::decode_build(compiler::encode(req).substr(compiler::kHeaderBytes));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->source, req.source);
  // A length beyond the limit is refused from the header alone.
  compiler::FrameReader big;
  const char header[8] = {3, 0, 0, 0, 0, 0, 0, 0x20};  // 512 MiB
  big.feed(header, 8);
  auto f = big.next();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().message, "frame length 536870912 exceeds the limit of 268435456 bytes");
}

}  // namespace uvcl::testing::compiler_tests
