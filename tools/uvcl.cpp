// uvcl — the command-line program. One file per subcommand (cmd_*.cpp).
//
// Exit 0 on success; 1 with "uvcl: error: ..." on stderr on any error (and
// nothing partial on stdout); 2 on a usage error.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli.hpp"
#include "program/job.hpp"

namespace {

using uvcl::cli::Args;

constexpr const char* kUsage =
    "usage: uvcl devices [--json] [--config FILE]\n"
    "       uvcl run JOB.json [--config FILE] [--device N|any] [--out DIR] [--schedule FILE] [--trace FILE]\n"
    "                [--no-outputs] [--quiet] [--kernels DIR]\n"
    "       uvcl tune JOB.json [--launch I] [--local 16,32,64|8x8,16x16] [--reps N] [--warmup N] [--json]\n"
    "                 [--config FILE] [--device N]\n"
    "       uvcl serve [--listen HOST:PORT] [--token-file FILE] [--config FILE] [--max-body BYTES]\n"
    "                  [--max-header BYTES] [--max-buffer-bytes BYTES] [--max-launches N] [--max-work-items N]\n"
    "                  [--max-jobs N] [--max-connections N] [--max-connections-per-client N]\n"
    "                  [--idle-timeout-ms MS] [--header-timeout-ms MS] [--request-timeout-ms MS]\n"
    "                  [--kernels DIR] [--allow-source] [--job-timeout-ms MS] [--max-response-bytes BYTES]\n"
    "                  [--answer-budget BYTES]\n"
    "       uvcl COMMAND --help    what a command does and each of its options\n"
    "       uvcl --version\n";

constexpr const char* kConfigHelp =
    "  --config FILE   the engine configuration (JSON, docs/config.md); default: $UVCL_CONFIG if set,\n"
    "                  else the built-in defaults\n";

constexpr const char* kDevicesHelp =
    "usage: uvcl devices [--json] [--config FILE]\n"
    "\n"
    "Lists the OpenCL devices uvcl sees, with the index other commands take as --device N: one line\n"
    "per device (platform, name, type, memory, compute units, max work-group, fp16, fp64).\n"
    "\n"
    "options:\n"
    "  --json          print a JSON array instead: every field uvcl reads of each device\n";

constexpr const char* kRunHelp =
    "usage: uvcl run JOB.json [--config FILE] [--device N|any] [--out DIR] [--schedule FILE] [--trace FILE]\n"
    "                [--no-outputs] [--quiet] [--kernels DIR]\n"
    "\n"
    "Runs a job file (docs/job-format.md): builds its kernels, fills its buffers, enqueues its launches\n"
    "and prints one JSON object on stdout: the device, every output's values, and stats (launches,\n"
    "commands, cross-queue waits, queues, compile and run time in ms). While a job runs longer than half\n"
    "a second and stderr is a terminal, a progress line is shown on stderr.\n"
    "\n"
    "options:\n"
    "  --device N      run on device N (uvcl devices), overriding the job's \"device\"; \"any\": each\n"
    "                  launch that names no device goes where the engine expects it to end first\n"
    "  --out DIR       also write each output as DIR/NAME.npy (NumPy format 1.0); DIR is made if missing\n"
    "                  (with its parents); an output name that is not a plain file name is refused\n"
    "                  before the job runs\n"
    "  --schedule FILE write what the scheduler decided, as a JSON array with one object per command in\n"
    "                  submission order: id, op (launch, write, read, copy, fill), launch (the launch's\n"
    "                  index in the job, for launches), device, queue, reads and writes (buffer names),\n"
    "                  waits (ids of the commands on other queues it waited for) and completed (ids of\n"
    "                  those it would have waited for, had they not completed before it was submitted)\n"
    "  --trace FILE    write a Chrome trace-event JSON file of every command (open it in Perfetto or\n"
    "                  chrome://tracing); turns on profiling for device times\n"
    "  --no-outputs    leave the outputs' values out of the printed JSON (\"outputs\": {}): the device\n"
    "                  and stats only, for jobs whose outputs are large; --out still writes them\n"
    "  --quiet         --no-outputs, and no progress line\n"
    "  --kernels DIR   build every .cl file of DIR first (a failed build is an error naming the file and\n"
    "                  the device, with the log); launches may name its kernels as \"FILE:ENTRY\", as\n"
    "                  for uvcl serve --kernels\n";

constexpr const char* kTuneHelp =
    "usage: uvcl tune JOB.json [--launch I] [--local 16,32,64|8x8,16x16] [--reps N] [--warmup N] [--json]\n"
    "                 [--config FILE] [--device N]\n"
    "\n"
    "Times one launch of a job with each candidate local work size (docs/tune.md) and prints a table:\n"
    "median, min and max device nanoseconds per candidate (or why it was skipped), then the fastest.\n"
    "The job's buffers are made and filled first; the launch runs alone on the device each time.\n"
    "\n"
    "options:\n"
    "  --launch I      the launch to time: its index in the job's \"launches\" (default 0)\n"
    "  --local LIST    comma-separated candidates: one size (\"64\", applied to axis 0) or one per axis\n"
    "                  (\"16x16\"); default 16,32,64,128,256,512,1024\n"
    "  --reps N        timed runs per candidate, 1..9999 (default 5)\n"
    "  --warmup N      untimed runs per candidate first, 0..9999 (default 1)\n"
    "  --json          print one JSON object instead of the table: launch, kernel, global, device,\n"
    "                  device_name, warmup, reps, rows (local, and median_ns/min_ns/max_ns/device_ns or\n"
    "                  skipped) and fastest (the fastest row's local and median_ns)\n"
    "  --device N      run on device N, overriding the job's \"device\"\n";

constexpr const char* kServeHelp =
    "usage: uvcl serve [--listen HOST:PORT] [--token-file FILE] [--config FILE] [--max-body BYTES]\n"
    "                  [--max-header BYTES] [--max-buffer-bytes BYTES] [--max-launches N] [--max-work-items N]\n"
    "                  [--max-jobs N] [--max-connections N] [--max-connections-per-client N]\n"
    "                  [--idle-timeout-ms MS] [--header-timeout-ms MS] [--request-timeout-ms MS]\n"
    "                  [--kernels DIR] [--allow-source] [--job-timeout-ms MS] [--max-response-bytes BYTES]\n"
    "                  [--answer-budget BYTES]\n"
    "\n"
    "Runs jobs sent over HTTP/1.1 (POST /v1/run with a job file as the body), all on one loop; also\n"
    "GET /v1/devices, /v1/health and /metrics (docs/serve.md). Answers are written as they are\n"
    "formatted (JSON, chunked); \"Accept: application/octet-stream\" gets a job's one output as raw\n"
    "bytes, \"Accept: multipart/mixed\" one .npy part per output. The first SIGINT or SIGTERM stops\n"
    "listening and cancels running jobs (each answered 503); a second exits at once.\n"
    "Sizes (BYTES) take a suffix k, M, G or T (1024-based).\n"
    "\n"
    "options:\n"
    "  --listen HOST:PORT            address to bind (default 127.0.0.1:7070): numeric IPv4, [IPv6] or\n"
    "                                localhost; port 0 picks a free port\n"
    "  --token-file FILE             require \"Authorization: Bearer TOKEN\" on every request; the file\n"
    "                                holds the token on one line\n"
    "  --max-body BYTES              largest request body (default 8M)\n"
    "  --max-header BYTES            request line plus headers (default 16k)\n"
    "  --max-buffer-bytes BYTES      total bytes of a job's buffers (default 256M; 0: the device's limit)\n"
    "  --max-launches N              kernel launches per job, repeats counted (default 10000; 0: no limit)\n"
    "  --max-work-items N            work-items of one launch (default 2^32; 0: only the 64-bit bound)\n"
    "  --max-jobs N                  jobs running at once; the next gets 429 (default 16)\n"
    "  --max-connections N           open connections (default 256)\n"
    "  --max-connections-per-client N  open connections from one client address (default 64; 0: no cap)\n"
    "  --idle-timeout-ms MS          close an idle keep-alive connection after this (default 10000)\n"
    "  --header-timeout-ms MS        request line and headers within this of the first byte (default 5000)\n"
    "  --request-timeout-ms MS       the whole request within this of its first byte (default 30000)\n"
    "  --kernels DIR                 build every .cl file of DIR at start-up (a failed build stops the\n"
    "                                start); jobs name its kernels as \"FILE:ENTRY\"\n"
    "  --allow-source                accept jobs that carry kernel source (refused with 403 otherwise);\n"
    "                                on a CPU device such a kernel runs inside this process: anyone with\n"
    "                                the token runs native code as this server's user\n"
    "  --job-timeout-ms MS           a job still running after this gets 504 and is cancelled\n"
    "                                (default 30000)\n"
    "  --max-response-bytes BYTES    a job whose answer could exceed this is refused with 413 before it\n"
    "                                runs (default 64M; 0: no limit)\n"
    "  --answer-budget BYTES         memory for answers not yet sent, all jobs together: a job reserves\n"
    "                                its outputs' bytes before it runs and gets 503 (Retry-After) when\n"
    "                                they do not fit (default 1G, at least 1M)\n";

struct Command {
  const char* name;
  int (*run)(const Args&, const uvcl::Config&);
  const char* flags;       // flags taking no value, space-separated
  const char* options;     // options taking a value
  std::size_t positional;  // required positional arguments
  const char* help;        // uvcl COMMAND --help: what it does, every option
};

constexpr Command kCommands[] = {
    {"devices", uvcl::cli::cmd_devices, " --json ", " --config ", 0, kDevicesHelp},
    {"run", uvcl::cli::cmd_run, " --no-outputs --quiet ", " --config --device --out --schedule --trace --kernels ", 1,
     kRunHelp},
    {"tune", uvcl::cli::cmd_tune, " --json ", " --config --device --launch --local --reps --warmup ", 1, kTuneHelp},
    {"serve", uvcl::cli::cmd_serve, " --allow-source ",
     " --listen --token-file --config --max-body --max-header --max-buffer-bytes --max-launches --max-work-items --max-jobs"
     " --max-connections --max-connections-per-client --idle-timeout-ms --header-timeout-ms --request-timeout-ms"
     " --kernels --job-timeout-ms --max-response-bytes --answer-budget ",
     0, kServeHelp},
};

int usage(const std::string& why) {
  std::fprintf(stderr, "uvcl: %s\n%s", why.c_str(), kUsage);
  return 2;
}

bool listed(const char* list, const std::string& word) {
  return std::strstr(list, (" " + word + " ").c_str()) != nullptr;
}

std::optional<std::size_t> parse_index(const std::string& v) {
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoul(v);
}

std::optional<std::string> parse(int argc, char** argv, const Command& c, Args& a) {
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.size() > 1 && arg[0] == '-') {
      if (listed(c.flags, arg)) {
        if (arg == "--json") a.json = true;
        else if (arg == "--allow-source") a.allow_source = true;
        else if (arg == "--no-outputs") a.no_outputs = true;
        else if (arg == "--quiet") a.quiet = a.no_outputs = true;
        continue;
      }
      if (!listed(c.options, arg)) return "unknown option '" + arg + "' for " + c.name;
      if (i + 1 >= argc) return arg + " needs a value";
      const std::string v = argv[++i];
      a.values[arg] = v;
      if (arg == "--config") a.config = v;
      else if (arg == "--out") a.out = v;
      else if (arg == "--schedule") a.schedule = v;
      else if (arg == "--trace") a.trace = v;
      else if (arg == "--listen") a.listen = v;
      else if (arg == "--token-file") a.token_file = v;
      else if (arg == "--local") a.local = v;
      else if (arg == "--device" && v == "any" && c.name == std::string("run"))
        a.device = uvcl::job::kAnyDevice;
      else if (arg == "--device" || arg == "--launch") {
        auto n = parse_index(v);
        if (!n) return arg + " needs a non-negative integer, got '" + v + "'";
        (arg == "--device" ? a.device : a.launch) = n;
      }
      continue;
    }
    a.positional.push_back(arg);
  }
  if (a.positional.size() != c.positional)
    return std::string(c.name) + " takes " + std::to_string(c.positional) + " file argument(s), got " +
           std::to_string(a.positional.size());
  return std::nullopt;
}

bool is_help(const char* arg) { return std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0; }

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && is_help(argv[1])) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc >= 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("uvcl %s\n", UVCL_VERSION);
    return 0;
  }
  if (argc < 2) return usage("missing command");
  Args a;
  a.command = argv[1];
  for (const Command& c : kCommands) {
    if (a.command != c.name) continue;
    // --help anywhere, before any other checking: what the command takes.
    for (int i = 2; i < argc; ++i)
      if (is_help(argv[i])) {
        std::fputs(c.help, stdout);
        std::fputs("\ncommon options:\n", stdout);
        std::fputs(kConfigHelp, stdout);
        std::fputs("  --help, -h      print this help and exit\n", stdout);
        return 0;
      }
    if (auto why = parse(argc, argv, c, a)) return usage(*why);
    auto config = uvcl::load_config(a.config);
    if (!config) return uvcl::cli::fail(config.error());
    return c.run(a, config.value());
  }
  return usage("unknown command '" + a.command + "'");
}
