#include "program/kernel_library.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "files.hpp"
#include "json/json_util.hpp"

namespace uvcl::job {

namespace {

// A library file's source is held in memory and sent to the compiler whole.
constexpr std::uint64_t kMaxSourceBytes = 16u << 20;

bool plain_name(const std::string& s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

}  // namespace

Result<std::unique_ptr<KernelLibrary>> KernelLibrary::load(Engine& engine, const std::string& dir,
                                                           const std::string& what) {
  const auto error = [&](Status s, const std::string& m) { return Error{s, what + ": " + m}; };
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return error(Status::Io, dir + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return error(Status::Io, dir + ": not a folder (" + files::type_name(st.st_mode) + ")");
  DIR* d = ::opendir(dir.c_str());
  if (!d) return error(Status::Io, dir + ": " + std::strerror(errno));
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".cl") == 0) names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  if (names.empty()) return error(Status::InvalidArgument, dir + ": no .cl files");

  // Every name and file checked and read before the first build.
  const std::string base = dir.back() == '/' ? dir : dir + "/";
  std::vector<std::pair<std::string, std::string>> sources;  // FILE, source
  for (const std::string& name : names) {
    const std::string file = name.substr(0, name.size() - 3);
    if (!plain_name(file))
      return error(Status::InvalidArgument,
                   base + name + ": a kernel file's name must be letters, digits, '_', '.' or '-' before .cl (jobs "
                                 "name its kernels FILE:ENTRY)");
    auto source = files::read_regular(base + name, kMaxSourceBytes, "the limit for a kernel file");
    if (!source) return std::move(source).error().context(what);
    sources.emplace_back(file, std::move(source.value()));
  }

  std::unique_ptr<KernelLibrary> lib(new KernelLibrary(engine, dir));
  lib->engine_alive_ = engine.lifetime();
  // Every (file, device) build at once; the loop runs until all reported.
  // Shared with the callbacks: they outlive this frame if run_until fails.
  struct Builds {
    std::size_t pending = 0;
    std::optional<Error> failed;
  };
  auto builds = std::make_shared<Builds>();
  for (const auto& [file, source] : sources) {
    std::vector<uvcl::Program>& progs = lib->programs_[file];
    for (std::size_t dev = 0; dev < engine.device_count() && !builds->failed; ++dev) {
      const std::string where = base + file + ".cl (device " + std::to_string(dev) + ")";
      auto p = engine.compile(dev, source, "", [builds, where](Result<void> r) {
        --builds->pending;
        if (!r && !builds->failed) builds->failed = std::move(r).error().context(where);
      });
      if (!p) {
        builds->failed = std::move(p).error().context(where);
        break;
      }
      ++builds->pending;
      progs.push_back(p.value());
    }
    if (builds->failed) break;
  }
  if (builds->pending > 0)
    if (auto ran = engine.run_until([&] { return builds->pending == 0; }); !ran)
      return std::move(ran).error().context(what);
  if (builds->failed) return std::move(*builds->failed).context(what);
  return lib;
}

KernelLibrary::~KernelLibrary() {
  if (engine_alive_.expired()) return;  // the engine released everything itself
  for (const auto& [file, progs] : programs_)
    for (uvcl::Program p : progs) (void)engine_.release(p);
}

Result<uvcl::Program> KernelLibrary::program(const std::string& file, std::size_t device) const {
  auto it = programs_.find(file);
  if (it == programs_.end()) {
    std::string have;
    for (const auto& [name, progs] : programs_) have += (have.empty() ? "" : ", ") + name;
    return Error{Status::InvalidJob, "no kernel file " + json::quote(file + ".cl") + " in the server's library (" +
                                         have + ")"};
  }
  if (device >= it->second.size())
    return Error{Status::InvalidJob, "device " + std::to_string(device) + " out of range"};
  return it->second[device];
}

std::vector<std::string> KernelLibrary::files() const {
  std::vector<std::string> out;
  for (const auto& [name, progs] : programs_) out.push_back(name);
  return out;
}

}  // namespace uvcl::job
