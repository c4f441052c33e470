// uvcl — the command-line program. One file per subcommand (cmd_*.cpp).
//
// Exit 0 on success; 1 with "uvcl: error: ..." on stderr on any error (and
// nothing partial on stdout); 2 on a usage error.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli.hpp"

namespace {

using uvcl::cli::Args;

constexpr const char* kUsage =
    "usage: uvcl devices [--json] [--config FILE]\n"
    "       uvcl run JOB.json [--config FILE] [--device N] [--out DIR] [--schedule FILE] [--trace FILE]\n"
    "       uvcl tune JOB.json [--launch I] [--local 16,32,64|8x8,16x16] [--reps N] [--warmup N]\n"
    "                 [--config FILE] [--device N]\n"
    "       uvcl serve [--listen HOST:PORT] [--token-file FILE] [--config FILE] [--max-body BYTES]\n"
    "                  [--max-header BYTES] [--max-buffer-bytes BYTES] [--max-launches N] [--max-work-items N]\n"
    "                  [--max-jobs N] [--max-connections N] [--max-connections-per-client N]\n"
    "                  [--idle-timeout-ms MS] [--header-timeout-ms MS] [--request-timeout-ms MS]\n"
    "                  [--kernels DIR] [--allow-source] [--job-timeout-ms MS] [--max-response-bytes BYTES]\n";

struct Command {
  const char* name;
  int (*run)(const Args&, const uvcl::Config&);
  const char* flags;       // flags taking no value, space-separated
  const char* options;     // options taking a value
  std::size_t positional;  // required positional arguments
};

constexpr Command kCommands[] = {
    {"devices", uvcl::cli::cmd_devices, " --json ", " --config ", 0},
    {"run", uvcl::cli::cmd_run, " ", " --config --device --out --schedule --trace ", 1},
    {"tune", uvcl::cli::cmd_tune, " ", " --config --device --launch --local --reps --warmup ", 1},
    {"serve", uvcl::cli::cmd_serve, " --allow-source ",
     " --listen --token-file --config --max-body --max-header --max-buffer-bytes --max-launches --max-work-items --max-jobs"
     " --max-connections --max-connections-per-client --idle-timeout-ms --header-timeout-ms --request-timeout-ms"
     " --kernels --job-timeout-ms --max-response-bytes ",
     0},
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
        if (arg == "--allow-source") a.allow_source = true;
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

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc < 2) return usage("missing command");
  Args a;
  a.command = argv[1];
  for (const Command& c : kCommands) {
    if (a.command != c.name) continue;
    if (auto why = parse(argc, argv, c, a)) return usage(*why);
    auto config = uvcl::load_config(a.config);
    if (!config) return uvcl::cli::fail(config.error());
    return c.run(a, config.value());
  }
  return usage("unknown command '" + a.command + "'");
}
