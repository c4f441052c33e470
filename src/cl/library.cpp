// library.cpp — loading the OpenCL ICD loader at run time.
#include <dlfcn.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cl/api.hpp"
#include "files.hpp"

namespace uvcl::cl {

namespace {

// Where distributions and vendor SDKs put the ICD loader. The bare sonames
// come first so that the dynamic linker's own search (LD_LIBRARY_PATH,
// ld.so.cache) wins; the folders catch installs that are not in the cache.
constexpr const char* kFolders[] = {
    "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib", "/opt/rocm/lib", "/usr/local/cuda/lib64",
};
constexpr const char* kNames[] = {"libOpenCL.so.1", "libOpenCL.so"};

void* dlsym_lookup(void* handle, const char* name) { return ::dlsym(handle, name); }

}  // namespace

std::vector<std::string> Library::candidate_paths(const std::string& explicit_path) {
  // A library the user named is the only one tried: falling back to the
  // system loader would run another OpenCL than the one asked for, silently.
  if (!explicit_path.empty()) return {explicit_path};
  std::vector<std::string> paths;
  for (const char* name : kNames) paths.emplace_back(name);
  for (const char* folder : kFolders) {
    for (const char* name : kNames) paths.push_back(std::string(folder) + "/" + name);
  }
  return paths;
}

Result<std::unique_ptr<Library>> Library::open(const std::string& explicit_path) {
  // A path (not a bare name for the linker's search) must be a regular
  // file: dlopen of a FIFO blocks in its open.
  if (explicit_path.find('/') != std::string::npos) {
    if (auto f = files::require_regular(explicit_path); !f)
      return make_error(Status::DyLibNotFound, "OpenCL library (opencl.library) " + f.error().message);
  }
  return open_first(candidate_paths(explicit_path));
}

Result<std::unique_ptr<Library>> Library::open_first(const std::vector<std::string>& paths) {
  std::string first_error;
  for (const std::string& path : paths) {
    ::dlerror();  // clear a stale message so the one read below is ours
    // RTLD_NODELETE: ocl-icd never unloads the vendor drivers it opened, and
    // unmapping the loader itself loses its platform list (a leak per
    // open/close cycle, seen under LeakSanitizer) and makes the next open()
    // scan the vendors again. dlclose still drops the reference.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == nullptr) {
      if (first_error.empty()) {
        const char* why = ::dlerror();
        first_error = why != nullptr ? why : "dlopen failed";
      }
      continue;
    }
    // A loader that opens but lacks an entry point is reported as such, not
    // skipped: silently falling through to another library would hide a
    // broken install the user asked for.
    Result<Api> api = resolve(dlsym_lookup, handle, path);
    if (!api.ok()) {
      ::dlclose(handle);
      return std::move(api).error();
    }
    api->handle = handle;
    return std::unique_ptr<Library>(new Library(std::move(api).value()));
  }
  std::string message = "OpenCL library not found; tried:";
  for (const std::string& path : paths) {
    message += ' ';
    message += path;
  }
  if (!first_error.empty()) message += "; first error: " + first_error;
  return make_error(Status::DyLibNotFound, std::move(message));
}

Result<Api> Library::resolve(Lookup lookup, void* ctx, const std::string& path) {
  Api api;
  api.library_path = path;
  // memcpy, not a cast: converting an object pointer to a function pointer is
  // only conditionally supported in ISO C++ and -Wpedantic may flag it.
#define UVCL_CL_RESOLVE(name)                                                          \
  {                                                                                    \
    void* symbol = lookup(ctx, #name);                                                 \
    if (symbol == nullptr) {                                                           \
      return make_error(Status::MissingSymbol, "OpenCL library " + path + " lacks " #name); \
    }                                                                                  \
    static_assert(sizeof(api.name) == sizeof(symbol));                                 \
    std::memcpy(&api.name, &symbol, sizeof(symbol));                                   \
  }
  UVCL_CL_ENTRY_POINTS(UVCL_CL_RESOLVE)
#undef UVCL_CL_RESOLVE
  return api;
}

Library::~Library() {
  if (api_.handle != nullptr) ::dlclose(api_.handle);
}

}  // namespace uvcl::cl
