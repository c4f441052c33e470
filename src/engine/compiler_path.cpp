// compiler_path.cpp — see compiler_path.hpp. Built with UVCL_COMPILER_NEAR,
// a ':'-separated list of folders (relative ones to the folder of the binary
// holding this code), and UVCL_COMPILER_INSTALLED, the configured path.
#include "engine/compiler_path.hpp"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <filesystem>
#include <string_view>

namespace uvcl {

namespace {

// The folder of the binary holding this function: libuvcl.so, or the
// program that links the engine's parts. The main program's link map has an
// empty name (dladdr would give argv[0], maybe relative to a changed folder,
// or found on PATH): its path is /proc/self/exe.
std::filesystem::path own_folder() {
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&own_folder), &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0)
    return {};
  if (map != nullptr && map->l_name != nullptr && map->l_name[0] != '\0')
    return std::filesystem::path(map->l_name).parent_path();
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path{} : exe.parent_path();
}

}  // namespace

std::vector<std::string> compiler_candidates(const Config& config) {
  if (!config.compiler.empty()) return {config.compiler};
  std::vector<std::string> paths;
  auto add = [&paths](const std::filesystem::path& path) {
    std::string p = path.lexically_normal().string();
    if (std::find(paths.begin(), paths.end(), p) == paths.end()) paths.push_back(std::move(p));
  };
  const std::filesystem::path own = own_folder();
  std::string_view near = UVCL_COMPILER_NEAR;
  while (!near.empty()) {
    const std::size_t colon = near.find(':');
    const std::filesystem::path folder(near.substr(0, colon));
    near = colon == std::string_view::npos ? std::string_view{} : near.substr(colon + 1);
    if (folder.empty()) continue;
    if (folder.is_absolute())
      add(folder / "uvcl-compiler");
    else if (!own.empty())
      add(own / folder / "uvcl-compiler");
  }
  add(UVCL_COMPILER_INSTALLED);
  return paths;
}

}  // namespace uvcl
