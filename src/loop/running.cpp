// running.cpp — whether this thread is inside uv_run (running.hpp).
#include "loop/running.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <uv.h>

#include <cstdint>

namespace uvcl::loop {

namespace {

struct CodeRange {
  std::uintptr_t begin = 0, end = 0;
};

// uv_run's code, as the dynamic symbol table sizes it: the libuv this
// process runs (a host that links libuv statically, as Node.js does, and
// exports it, resolves uv_run to its own copy).
CodeRange uv_run_code() {
  CodeRange r;
  Dl_info info{};
  void* extra = nullptr;  // dladdr1 stores a const ElfW(Sym)* there
  void* fn = reinterpret_cast<void*>(&uv_run);
  if (dladdr1(fn, &info, &extra, RTLD_DL_SYMENT) == 0) return r;
  const auto* sym = static_cast<const ElfW(Sym)*>(extra);
  if (sym == nullptr ||
      info.dli_saddr == nullptr || sym->st_size == 0)
    return r;
  r.begin = reinterpret_cast<std::uintptr_t>(info.dli_saddr);
  r.end = r.begin + sym->st_size;
  return r;
}

}  // namespace

bool inside_uv_run() noexcept {
  static const CodeRange code = uv_run_code();
  if (code.begin == 0) return false;
  constexpr int kMaxFrames = 256;
  void* frames[kMaxFrames];
  const int n = backtrace(frames, kMaxFrames);
  for (int i = 0; i < n; ++i) {
    const auto pc = reinterpret_cast<std::uintptr_t>(frames[i]);
    if (pc > code.begin && pc <= code.end) return true;  // a return address: just past a call
  }
  return false;
}

}  // namespace uvcl::loop
