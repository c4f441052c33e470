// cli.hpp — what the uvcl subcommands share.
#pragma once

#include <cstddef>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "uvcl/config.hpp"
#include "uvcl/status.hpp"

namespace uvcl::cli {

// Parsed command line. Each subcommand reads the fields it accepts.
struct Args {
  std::string command;
  std::vector<std::string> positional;
  std::string config, out, schedule, trace, listen, token_file, local;
  std::optional<std::size_t> device, launch;
  bool json = false;
  bool allow_source = false;  // uvcl serve --allow-source
  bool no_outputs = false;    // run: leave the outputs' values out of the printed JSON
  bool quiet = false;         // run: no_outputs, and no progress line
  std::map<std::string, std::string> values;  // every option that takes a value, as given ("--max-jobs" -> "8")
};

// "uvcl: error: <Status>: <message>" on stderr; returns exit code 1.
inline int fail(const Error& e) {
  std::fprintf(stderr, "uvcl: error: %s\n", e.to_string().c_str());
  return 1;
}

int cmd_devices(const Args& a, const Config& config);
int cmd_run(const Args& a, const Config& config);
int cmd_tune(const Args& a, const Config& config);
int cmd_serve(const Args& a, const Config& config);

}  // namespace uvcl::cli
