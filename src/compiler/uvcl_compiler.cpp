// uvcl_compiler.cpp — the compiler process (uvcl-compiler).
//
// PoCL builds inside clBuildProgram, on the calling thread, and a
// pathological source can overflow the compiler's stack: on the engine's
// loop thread that froze every connection of a server for the length of a
// build, and a crash took the server down. The engine therefore builds in
// this program, started with posix_spawn and spoken to over a pipe
// (src/engine/compiler_process.cpp): a build that blocks blocks only here,
// and a crash kills only this process.
//
// Usage: uvcl-compiler --platform P --device D --name NAME --driver VERSION
//                      [--library PATH]
// Opens device D of platform P (the indexes of the engine's enumeration),
// checks that it is the device NAME with driver VERSION, then builds every
// source the engine sends (compiler/protocol.hpp) and answers each with the
// status, the build log, the binary and the kernels' parameter info. Frames
// come on fd 0 and go out on fd 1, which it moves above fd 2 at once
// (take_protocol_fds). Exits when its input closes.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "cl/api.hpp"
#include "cl/devices.hpp"
#include "cl/kernel_info.hpp"
#include "compiler/protocol.hpp"
#include "compiler/wire.hpp"

namespace {

using namespace uvcl;

// The protocol's own descriptors, moved above fd 2 before anything else
// runs (take_protocol_fds): fd 0 then reads /dev/null and fd 1 is pointed
// at stderr, so that nothing a driver reads or prints can touch a frame.
int g_in = -1, g_out = -1;

// The engine starts this program with frames on fds 0 and 1 and its stderr
// on fd 2 (loop/spawn.hpp). Whatever a caller passed, the standard fds end
// up open and distinct from the protocol's: a closed fd 0-2 is opened on
// /dev/null first, or the copies below (or a driver's first open) would land
// on it, and diagnostics written to stderr would be read as frames.
bool take_protocol_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0) continue;
    // Every lower fd is open: open() returns `fd` itself.
    if (::open("/dev/null", O_RDWR) != fd) return false;
  }
  g_in = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  g_out = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (g_in < 0 || g_out < 0) return false;
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0 || ::dup2(null, STDIN_FILENO) < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return false;
  if (null != STDIN_FILENO) ::close(null);
  return true;
}

bool write_all(const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(g_out, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// 1: all of it; 0: end of input before the first byte; -1: end or error
// in the middle.
int read_all(char* p, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(g_in, p + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return done == 0 && r == 0 ? 0 : -1;
    done += static_cast<std::size_t>(r);
  }
  return 1;
}

[[noreturn]] void refuse(const std::string& why) {
  (void)write_all(compiler::encode(compiler::Type::Refused, [&] {
    wire::Writer w;
    w.str(why);
    return w.out;
  }()));
  std::fprintf(stderr, "uvcl-compiler: %s\n", why.c_str());
  std::exit(2);
}

struct Args {
  long platform = -1, device = -1;
  std::string name, driver, library;
  bool have_name = false, have_driver = false;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (i + 1 >= argc) refuse("argument " + key + " needs a value");
    const std::string value = argv[++i];
    auto index = [&](long& out) {
      char* end = nullptr;
      out = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || out < 0) refuse(key + ": expected a non-negative integer, got \"" + value + "\"");
    };
    if (key == "--platform") index(a.platform);
    else if (key == "--device") index(a.device);
    else if (key == "--name") a.name = value, a.have_name = true;
    else if (key == "--driver") a.driver = value, a.have_driver = true;
    else if (key == "--library") a.library = value;
    else refuse("unknown argument " + key);
  }
  if (a.platform < 0 || a.device < 0 || !a.have_name || !a.have_driver)
    refuse("usage: uvcl-compiler --platform P --device D --name NAME --driver VERSION [--library PATH]");
  return a;
}

compiler::BuildResult build(const cl::Api& api, cl_context ctx, cl_device_id dev, const compiler::BuildRequest& req) {
  using Outcome = compiler::BuildResult::Outcome;
  compiler::BuildResult out;
  out.program = req.program;
  const char* src = req.source.c_str();
  const std::size_t len = req.source.size();
  cl_int rc = CL_SUCCESS;
  cl_program p = api.clCreateProgramWithSource(ctx, 1, &src, &len, &rc);
  if (rc != CL_SUCCESS) {
    out.log = cl::call_error(Status::KernelCompilation, "clCreateProgramWithSource", rc).message;
    return out;
  }
  rc = api.clBuildProgram(p, 1, &dev, req.options.c_str(), nullptr, nullptr);
  if (rc == CL_BUILD_PROGRAM_FAILURE) {
    out.outcome = Outcome::BuildFailed;
    out.log = cl::build_log(api, p, dev);
  } else if (rc != CL_SUCCESS) {
    out.log = cl::call_error(Status::KernelCompilation, "clBuildProgram", rc).message;
  } else {
    std::size_t size = 0;
    rc = api.clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr);
    if (rc == CL_SUCCESS && size > 0) {
      out.binary.resize(size);
      unsigned char* ptr = out.binary.data();
      rc = api.clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr);
    }
    auto kernels = cl::program_kernels(api, p);
    if (rc != CL_SUCCESS || size == 0) {
      out.log = rc != CL_SUCCESS ? cl::call_error(Status::KernelCompilation, "clGetProgramInfo(CL_PROGRAM_BINARIES)", rc).message
                                 : "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES): the driver gave no binary";
      out.binary.clear();
    } else if (!kernels) {
      out.log = kernels.error().message;
      out.binary.clear();
    } else {
      out.outcome = Outcome::Built;
      out.kernels = std::move(kernels.value());
    }
  }
  api.clReleaseProgram(p);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (!take_protocol_fds()) return 1;
  std::signal(SIGPIPE, SIG_IGN);  // the engine gone: a failed write, then exit
  const Args args = parse_args(argc, argv);

  auto lib = cl::Library::open(args.library);
  if (!lib) refuse(lib.error().to_string());
  const cl::Api& api = lib.value()->api();
  const std::vector<std::size_t> platforms{static_cast<std::size_t>(args.platform)};
  auto devices = cl::enumerate_devices(api, platforms, false);
  if (!devices) refuse(devices.error().to_string());
  const std::string where = "device " + std::to_string(args.device) + " of platform " + std::to_string(args.platform);
  if (static_cast<std::size_t>(args.device) >= devices->size())
    refuse(where + " does not exist (the platform has " + std::to_string(devices->size()) + " devices)");
  const cl::Device& dev = (*devices)[static_cast<std::size_t>(args.device)];
  if (dev.info.name != args.name || dev.info.driver_version != args.driver)
    refuse(where + " is \"" + dev.info.name + "\" (driver " + dev.info.driver_version + "), expected \"" + args.name +
           "\" (driver " + args.driver + ")");
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(dev.platform), 0};
  cl_int rc = CL_SUCCESS;
  cl_context ctx = api.clCreateContext(props, 1, &dev.id, nullptr, nullptr, &rc);
  if (rc != CL_SUCCESS) refuse(cl::call_error(Status::Initialization, "clCreateContext", rc).message + " on " + where);
  if (!write_all(compiler::encode(compiler::Type::Ready, {}))) return 1;

  for (;;) {
    char header[compiler::kHeaderBytes];
    const int got = read_all(header, sizeof header);
    if (got == 0) break;  // stdin closed between frames: done
    auto h = compiler::parse_header(header);
    std::optional<compiler::BuildRequest> req;
    std::string why = got < 0 ? "input ended inside a frame header" : !h ? h.error().message : "";
    if (why.empty() && h->type != compiler::Type::Build) why = "expected a Build frame";
    if (why.empty()) {
      std::string payload(h->length, '\0');
      if (h->length > 0 && read_all(payload.data(), h->length) != 1) why = "input ended inside a frame";
      else if (!(req = compiler::decode_build(payload))) why = "a Build frame that does not decode";
    }
    if (!why.empty()) {
      std::fprintf(stderr, "uvcl-compiler: protocol violation from the engine: %s\n", why.c_str());
      return 3;
    }
    if (!write_all(compiler::encode(build(api, ctx, dev.id, *req)))) return 1;
  }
  api.clReleaseContext(ctx);
  return 0;
}
