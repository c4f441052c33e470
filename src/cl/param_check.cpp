#include "cl/param_check.hpp"

#include <string>
#include <string_view>

#include "cl/kernel_info.hpp"

namespace uvcl {

namespace {

enum class Kind { Buffer, Local, Scalar };

Kind kind_of(ParamAccess a) noexcept {
  switch (a) {
    case ParamAccess::ReadOnly:
    case ParamAccess::Written:
    case ParamAccess::WriteOnly: return Kind::Buffer;
    case ParamAccess::Local: return Kind::Local;
    case ParamAccess::Scalar: return Kind::Scalar;
  }
  return Kind::Scalar;
}

bool starts_with(std::string_view s, std::string_view prefix) noexcept { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

const char* param_refusal(const KernelParam& p) noexcept {
  // Type names as OpenCL C spells them (CL_KERNEL_ARG_TYPE_NAME); qualifiers
  // such as "const" are reported apart, but strip one in case a driver does not.
  std::string_view type = p.type_name;
  if (starts_with(type, "const ")) type.remove_prefix(6);
  if (starts_with(type, "image") && type.size() > 2 && type.substr(type.size() - 2) == "_t")
    return "an image; uvcl passes buffers, scalars and local sizes, not image objects";
  if (type == "sampler_t") return "a sampler; uvcl passes buffers, scalars and local sizes, not sampler objects";
  if (type == "queue_t" || type == "clk_event_t" || type == "event_t" || type == "reserve_id_t")
    return "an OpenCL object (device queue, event or reservation); uvcl passes buffers, scalars and local sizes only";
  const Kind kind = kind_of(p.access);
  // __global, __constant and __local parameters uvcl can serve are pointers;
  // a pipe is __global but not a pointer.
  if (kind != Kind::Scalar && (type.empty() || type.back() != '*'))
    return "a memory object that is not a pointer (a pipe?); uvcl passes buffers to pointer parameters only";
  if (kind == Kind::Scalar && p.scalar_size == 0)
    return "a by-value type whose size uvcl cannot determine (a struct, a union or a typedef name); only "
           "built-in scalar types can be checked against the argument, so pass the value in a buffer instead";
  return nullptr;
}

bool declared_access_fits(ParamAccess inferred, ParamAccess declared) noexcept {
  return kind_of(inferred) == kind_of(declared);
}

const char* param_kind_text(ParamAccess a) noexcept {
  switch (kind_of(a)) {
    case Kind::Buffer: return "a buffer";
    case Kind::Local: return "a local size";
    case Kind::Scalar: return "a scalar";
  }
  return "?";
}

bool stores_whole_buffer(const KernelParam& p, std::span<const std::uint64_t> global, std::size_t bytes) {
  constexpr std::uint64_t kMaxEachItemGlobal = (std::uint64_t{1} << 31) - 1;
  if (p.access != ParamAccess::WriteOnly || !p.writes_each_item || global.empty()) return false;
  if (p.type_name.empty() || p.type_name.back() != '*') return false;
  const std::string pointee = p.type_name.substr(0, p.type_name.size() - 1);
  const std::size_t elem = cl::type_size(pointee);
  if (elem == 0 || pointee.back() == '3' || global[0] > kMaxEachItemGlobal) return false;
  for (std::size_t d = 1; d < global.size(); ++d)
    if (global[d] != 1) return false;
  return global[0] * elem >= bytes;  // no overflow: below 2^31 items of at most 128 bytes
}

}  // namespace uvcl
