// uvcl — the command-line program.
//
//   uvcl devices [--json] [--config FILE]
//   uvcl run JOB.json [--config FILE] [--device N] [--out DIR] [--schedule FILE]
//
// Exit 0 on success; 1 with "uvcl: error: ..." on stderr on any error (and
// nothing partial on stdout); 2 on a usage error.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "cl/api.hpp"
#include "cl/devices.hpp"
#include "engine/job_runner.hpp"
#include "json/job.hpp"
#include "uvcl/config.hpp"
#include "uvcl/engine.hpp"

namespace {

constexpr const char* kUsage =
    "usage: uvcl devices [--json] [--config FILE]\n"
    "       uvcl run JOB.json [--config FILE] [--device N] [--out DIR] [--schedule FILE]\n";

int fail(const uvcl::Error& e) {
  std::fprintf(stderr, "uvcl: error: %s\n", e.to_string().c_str());
  return 1;
}

int usage(const std::string& why) {
  std::fprintf(stderr, "uvcl: %s\n%s", why.c_str(), kUsage);
  return 2;
}

struct Args {
  std::string command, job, config, out, schedule;
  std::optional<std::size_t> device;
  bool json = false;
};

std::optional<std::string> parse_args(int argc, char** argv, Args& a) {
  if (argc < 2) return "missing command";
  a.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string& out) -> bool {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    if (arg == "--json" && a.command == "devices") {
      a.json = true;
    } else if (arg == "--config") {
      if (!value(a.config)) return "--config needs a file";
    } else if (arg == "--out" && a.command == "run") {
      if (!value(a.out)) return "--out needs a directory";
    } else if (arg == "--schedule" && a.command == "run") {
      if (!value(a.schedule)) return "--schedule needs a file";
    } else if (arg == "--device" && a.command == "run") {
      std::string v;
      if (!value(v) || v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
        return "--device needs a non-negative integer";
      a.device = std::stoul(v);
    } else if (a.command == "run" && a.job.empty() && (arg.empty() || arg[0] != '-')) {
      a.job = arg;
    } else {
      return "unknown argument '" + arg + "'";
    }
  }
  if (a.command == "run" && a.job.empty()) return "run needs a job file";
  return std::nullopt;
}

std::string human_bytes(std::uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1ull << 30));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1ull << 20));
  return buf;
}

int cmd_devices(const Args& a, const uvcl::Config& config) {
  auto lib = uvcl::cl::Library::open(config.library);
  if (!lib) return fail(lib.error());
  auto devices = uvcl::cl::enumerate_devices(lib.value()->api(), config.platform_ids, config.debug_backends);
  if (!devices) return fail(devices.error());
  if (a.json) {
    std::string out = "[";
    for (std::size_t i = 0; i < devices->size(); ++i)
      out += (i ? ",\n " : "") + uvcl::cl::device_info_json((*devices)[i].info);
    std::printf("%s]\n", out.c_str());
    return 0;
  }
  std::printf("%-5s %-28s %-36s %-5s %10s %4s %6s %4s %4s\n", "index", "platform", "name", "type", "memory", "CUs",
              "max-wg", "fp16", "fp64");
  for (const auto& d : devices.value()) {
    const uvcl::DeviceInfo& i = d.info;
    std::printf("%-5zu %-28.28s %-36.36s %-5s %10s %4u %6zu %4s %4s\n", i.index, i.platform_name.c_str(),
                i.name.c_str(), uvcl::device_type_name(i.type), human_bytes(i.global_memory).c_str(), i.compute_units,
                i.max_work_group_size, i.fp16 ? "yes" : "no", i.fp64 ? "yes" : "no");
  }
  if (devices->empty()) std::printf("(no OpenCL devices)\n");
  return 0;
}

std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

int cmd_run(const Args& a, const uvcl::Config& config) {
  auto job = uvcl::job::load_job_file(a.job);
  if (!job) return fail(job.error());
  auto engine = uvcl::Engine::create(config);
  if (!engine) return fail(engine.error());
  uvcl::job::RunOptions opts;
  opts.device = a.device;
  opts.base_dir = dir_of(a.job);
  opts.record_schedule = !a.schedule.empty();
  auto result = uvcl::job::run_job_sync(*engine.value(), std::move(job.value()), opts);
  if (!result) return fail(result.error());
  if (!a.schedule.empty()) {
    std::ofstream s(a.schedule, std::ios::binary);
    s << result->schedule_json;
    if (!s) return fail(uvcl::Error{uvcl::Status::Io, "cannot write schedule " + a.schedule});
  }
  if (!a.out.empty()) {
    for (const auto& o : result->outputs)
      if (auto w = uvcl::job::write_npy(a.out + "/" + o.name + ".npy", o); !w) return fail(w.error());
  }
  const std::string json = uvcl::job::result_json(*engine.value(), result.value());
  std::fwrite(json.data(), 1, json.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  Args a;
  if (auto why = parse_args(argc, argv, a)) return usage(*why);
  if (a.command != "devices" && a.command != "run") return usage("unknown command '" + a.command + "'");
  auto config = uvcl::load_config(a.config);
  if (!config) return fail(config.error());
  return a.command == "devices" ? cmd_devices(a, config.value()) : cmd_run(a, config.value());
}
