#include "program/job.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "files.hpp"
#include "json/json_util.hpp"
#include "program/untrusted_source.hpp"

namespace uvcl::job {

namespace {

using json::Path;
using json::Reader;
namespace od = json::od;

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();
constexpr std::string_view kPositive = "a positive integer";

// Explicit byte order: the job format fixes little-endian whatever the host.
void store_le(std::uint64_t bits, std::size_t size, std::byte* out) noexcept {
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<std::byte>((bits >> (8 * i)) & 0xffu);
}

struct IntRange {
  std::int64_t lo;
  std::uint64_t hi;
};

IntRange int_range(ScalarType t) noexcept {
  switch (t) {
    case ScalarType::Char: return {INT8_MIN, INT8_MAX};
    case ScalarType::UChar: return {0, UINT8_MAX};
    case ScalarType::Short: return {INT16_MIN, INT16_MAX};
    case ScalarType::UShort: return {0, UINT16_MAX};
    case ScalarType::Int: return {INT32_MIN, INT32_MAX};
    case ScalarType::UInt: return {0, UINT32_MAX};
    case ScalarType::Long: return {INT64_MIN, INT64_MAX};
    default: return {0, UINT64_MAX};
  }
}

// What a value of each type must be, as messages say it. Built once: values
// are read in loops over whole data arrays, messages are rare.
struct TypeTexts {
  std::string expected;      // "a uchar (integer 0..255)", "a float (a number, ...)"
  std::string out_of_range;  // floats: "a half (|x| <= 65504)"
};

const TypeTexts& type_texts(ScalarType t) {
  static const std::array<TypeTexts, 11> texts = [] {
    std::array<TypeTexts, 11> all;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const auto type = static_cast<ScalarType>(i);
      const std::string name(scalar_type_name(type));
      const std::string a = name[0] == 'i' ? "an " : "a ";  // "an int", "a uint": by sound
      if (!scalar_is_float(type)) {
        const IntRange range = int_range(type);
        all[i].expected = a + name + " (integer " + std::to_string(range.lo) + ".." + std::to_string(range.hi) + ")";
      } else {
        all[i].expected = a + name + " (a number, \"nan\", \"inf\" or \"-inf\")";
        all[i].out_of_range = a + name + (type == ScalarType::Half ? " (|x| <= 65504)" : " (|x| <= 3.4028235e38)");
      }
    }
    return all;
  }();
  return texts[static_cast<std::size_t>(t)];
}

// Reads one value of type `t` into its little-endian bytes (scalar_size(t) of them).
Result<void> read_scalar(Reader& r, od::value& v, const Path& at, ScalarType t, std::byte* out) {
  const std::size_t size = scalar_size(t);
  const TypeTexts& texts = type_texts(t);
  if (!scalar_is_float(t)) {
    const IntRange range = int_range(t);
    if (scalar_is_signed(t)) {
      std::int64_t x = 0;
      UVCL_TRY(r.get_int(v, at, range.lo, static_cast<std::int64_t>(range.hi), x, texts.expected));
      store_le(static_cast<std::uint64_t>(x), size, out);  // two's complement, truncated to size
    } else {
      std::uint64_t x = 0;
      UVCL_TRY(r.get_uint(v, at, 0, range.hi, x, texts.expected));
      store_le(x, size, out);
    }
    return {};
  }

  // JSON has no literal for non-finite numbers; these strings stand in.
  double d = 0;
  if (Reader::lead(v) == '"') {
    const std::string shown = Reader::text(v);
    std::string_view s;
    UVCL_TRY(r.get_string(v, at, s, texts.expected));
    if (s == "nan") {
      d = std::numeric_limits<double>::quiet_NaN();
    } else if (s == "inf") {
      d = std::numeric_limits<double>::infinity();
    } else if (s == "-inf") {
      d = -std::numeric_limits<double>::infinity();
    } else {
      return r.fail(at, "expected " + texts.expected + ", got " + shown);
    }
  } else {
    UVCL_TRY(r.get_double(v, at, d, texts.expected));
  }

  if (t == ScalarType::Double) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    store_le(bits, size, out);
    return {};
  }
  // Doubles at or past FLT_MAX + half an ulp round to inf; converting them is
  // also undefined behaviour, so check before the cast.
  constexpr double kFloatLimit = 0x1.ffffffp+127;
  if (std::isfinite(d) && std::fabs(d) >= kFloatLimit) return r.expected(at, texts.out_of_range, v);
  const auto f = static_cast<float>(d);
  if (t == ScalarType::Float) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    store_le(bits, size, out);
    return {};
  }
  // Via float is exact enough: float keeps 24 bits, over 2 * 11 + 2, so the
  // double rounding cannot change a half result.
  const std::uint16_t h = float_to_half(f);
  if (std::isfinite(d) && (h & 0x7fffu) == 0x7c00u) return r.expected(at, texts.out_of_range, v);
  store_le(h, size, out);
  return {};
}

// A name read before the thing it names may have been seen; resolved at the end.
struct Ref {
  std::string path;  // rendered: the Path it came from is gone by then
  std::string name;
};

class JobParser {
 public:
  JobParser(Reader& r, const ParseOptions& options) : r_(r), options_(options) {}

  Result<Job> parse(od::object& root) {
    bool has_buffers = false, has_launches = false;  // "kernels" is optional: library kernels only
    auto field = [&](std::string_view key, od::value& v, const Path& p) -> Result<void> {
      if (key == "device") return device(v, p, job_.device);
      if (key == "buffers") {
        has_buffers = true;
        return buffers(v, p);
      }
      if (key == "kernels") return kernels(v, p);
      if (key == "launches") {
        has_launches = true;
        return launches(v, p);
      }
      return outputs(v, p);
    };
    UVCL_TRY(r_.fields(root, Path(), {"device", "buffers", "kernels", "launches", "outputs"}, field));
    if (!has_buffers) return r_.fail(Path(), "missing required key \"buffers\"");
    if (!has_launches) return r_.fail(Path(), "missing required key \"launches\"");
    UVCL_TRY(resolve());
    return std::move(job_);
  }

 private:
  Result<void> no_files(const Path& at) const {
    if (options_.allow_files) return {};
    return r_.fail(at, "files are not allowed here");
  }

  Result<void> path_string(od::value& v, const Path& at, std::string& out) {
    std::string_view s;
    UVCL_TRY(r_.get_string(v, at, s, "a file path"));
    if (s.empty()) return r_.fail(at, "expected a file path, got \"\"");
    out = s;
    return {};
  }

  Result<void> buffers(od::value& v, const Path& at) {
    od::object obj;
    UVCL_TRY(r_.get_object(v, at, obj, "an object of buffers by name"));
    auto field = [&](std::string_view name, od::value& b, const Path& p) -> Result<void> {
      if (name.empty()) return r_.fail(p, "empty name");
      UVCL_TRY(buffer(name, b, p));
      buffer_index_.emplace(std::string(name), job_.buffers.size() - 1);
      return {};
    };
    return r_.fields(obj, at, {}, field);
  }

  Result<void> buffer(std::string_view name, od::value& v, const Path& at) {
    od::object obj;
    UVCL_TRY(r_.get_object(v, at, obj, "an object with \"type\", \"count\" and optional \"init\""));
    Buffer buf;
    buf.name = name;
    bool has_type = false, has_count = false, has_init = false;
    // "init" can come before "type" and "count", which reading it needs, and
    // On-Demand reads forward only: skip it now, read it in a second pass.
    auto first = [&](std::string_view key, od::value& f, const Path& p) -> Result<void> {
      if (key == "type") {
        const std::string shown = Reader::text(f);
        std::string_view s;
        UVCL_TRY(r_.get_string(f, p, s, "a type name"));
        auto t = scalar_type_from_name(s);
        if (!t)
          return r_.fail(p, "expected a type name (char, uchar, short, ushort, int, uint, long, ulong, half, float, "
                            "double), got " + shown);
        buf.type = *t;
        has_type = true;
      } else if (key == "count") {
        UVCL_TRY(r_.get_uint(f, p, 1, kU64Max, buf.count, kPositive));
        has_count = true;
      } else {
        has_init = true;
      }
      return {};
    };
    UVCL_TRY(r_.fields(obj, at, {"type", "count", "init"}, first));
    if (!has_type) return r_.fail(at, "missing required key \"type\"");
    if (!has_count) return r_.fail(at, "missing required key \"count\"");
    const std::size_t size = scalar_size(buf.type);
    if (buf.count > std::numeric_limits<std::size_t>::max() / size) {
      const Path p = at.key("count");
      return r_.fail(p, std::to_string(buf.count) + " elements of " + std::string(scalar_type_name(buf.type)) +
                            " overflow a 64-bit byte size");
    }
    if (has_init) {
      bool nonempty = false;
      if (auto e = obj.reset().get(nonempty)) return r_.syntax(e, nullptr);
      auto second = [&](std::string_view key, od::value& f, const Path& p) -> Result<void> {
        return key == "init" ? init(f, p, buf) : Result<void>();
      };
      UVCL_TRY(r_.fields(obj, at, {"type", "count", "init"}, second));
    }
    job_.buffers.push_back(std::move(buf));
    return {};
  }

  Result<void> init(od::value& v, const Path& at, Buffer& buf) {
    od::object obj;
    UVCL_TRY(r_.get_object(v, at, obj, "an object with one of \"fill\", \"data\", \"file\" or \"safetensors\""));
    const std::size_t size = scalar_size(buf.type);
    Init& in = buf.init;
    int sources = 0;
    bool has_tensor = false;
    auto field = [&](std::string_view key, od::value& f, const Path& p) -> Result<void> {
      if (key == "tensor") {
        std::string_view s;
        UVCL_TRY(r_.get_string(f, p, s, "a tensor name"));
        in.tensor = s;
        has_tensor = true;
        return {};
      }
      ++sources;
      if (key == "fill") {
        in.kind = Init::Kind::Fill;
        in.bytes.resize(size);
        return read_scalar(r_, f, p, buf.type, in.bytes.data());
      }
      if (key == "data") {
        in.kind = Init::Kind::Data;
        return data(f, p, buf);
      }
      UVCL_TRY(no_files(p));
      in.kind = key == "file" ? Init::Kind::File : Init::Kind::Safetensors;
      return path_string(f, p, in.path);
    };
    UVCL_TRY(r_.fields(obj, at, {"fill", "data", "file", "safetensors", "tensor"}, field));
    if (sources != 1) return r_.fail(at, "expected exactly one of \"fill\", \"data\", \"file\" or \"safetensors\"");
    if (in.kind == Init::Kind::Safetensors && !has_tensor)
      return r_.fail(at, "missing required key \"tensor\" (the tensor to read from the safetensors file)");
    if (in.kind != Init::Kind::Safetensors && has_tensor) {
      const Path p = at.key("tensor");
      return r_.fail(p, "only allowed with \"safetensors\"");
    }
    return {};
  }

  Result<void> data(od::value& v, const Path& at, Buffer& buf) {
    od::array arr;
    UVCL_TRY(r_.get_array(v, at, arr, "an array of values"));
    const std::size_t size = scalar_size(buf.type);
    std::vector<std::byte>& bytes = buf.init.bytes;
    std::uint64_t n = 0;
    std::byte extra[8];  // surplus values are still checked, to report how many there are
    auto element = [&](std::size_t, od::value& e, const Path& p) -> Result<void> {
      std::byte* out = extra;
      if (n < buf.count) {
        bytes.resize(bytes.size() + size);
        out = bytes.data() + bytes.size() - size;
      }
      ++n;
      return read_scalar(r_, e, p, buf.type, out);
    };
    UVCL_TRY(r_.elements(arr, at, element));
    if (n != buf.count)
      return r_.fail(at, "expected " + std::to_string(buf.count) + " values (count), got " + std::to_string(n));
    return {};
  }

  Result<void> kernels(od::value& v, const Path& at) {
    od::object obj;
    UVCL_TRY(r_.get_object(v, at, obj, "an object of kernels by name"));
    auto field = [&](std::string_view name, od::value& k, const Path& p) -> Result<void> {
      if (name.empty()) return r_.fail(p, "empty name");
      if (name.find(':') != std::string_view::npos)
        return r_.fail(p, "a kernel name may not contain ':' (a launch's \"FILE:ENTRY\" names a kernel of the "
                          "server's library)");
      UVCL_TRY(kernel(name, k, p));
      kernel_index_.emplace(std::string(name), job_.kernels.size() - 1);
      return {};
    };
    return r_.fields(obj, at, {}, field);
  }

  Result<void> kernel(std::string_view name, od::value& v, const Path& at) {
    od::object obj;
    UVCL_TRY(r_.get_object(v, at, obj, "an object with \"source\" or \"file\""));
    Kernel k;
    k.name = name;
    int sources = 0;
    bool has_entry = false;
    auto field = [&](std::string_view key, od::value& f, const Path& p) -> Result<void> {
      std::string_view s;
      if (key == "file") {
        ++sources;
        UVCL_TRY(no_files(p));
        return path_string(f, p, k.file);
      }
      if (key == "entry") {
        UVCL_TRY(r_.get_string(f, p, s, "a kernel function name"));
        if (s.empty()) return r_.fail(p, "expected a kernel function name, got \"\"");
        k.entry = s;
        has_entry = true;
        return {};
      }
      UVCL_TRY(r_.get_string(f, p, s));
      if (key == "source") {
        ++sources;
        k.source = s;
      } else if (key == "build_options") {
        k.build_options = std::string(s);
      } else {
        k.options = s;
      }
      return {};
    };
    UVCL_TRY(r_.fields(obj, at, {"source", "file", "entry", "options", "build_options"}, field));
    if (sources != 1) return r_.fail(at, "expected exactly one of \"source\" or \"file\"");
    if (options_.untrusted_kernels) {
      if (auto why = refuse_untrusted_source(k.source)) return r_.fail(at.key("source"), *why);
      if (auto why = refuse_untrusted_options(k.options)) return r_.fail(at.key("options"), *why);
    }
    if (!has_entry) k.entry = k.name;
    job_.kernels.push_back(std::move(k));
    return {};
  }

  Result<void> launches(od::value& v, const Path& at) {
    od::array arr;
    UVCL_TRY(r_.get_array(v, at, arr, "an array of launches"));
    auto element = [&](std::size_t, od::value& l, const Path& p) { return launch(l, p); };
    return r_.elements(arr, at, element);
  }

  // A device index, or "any" (kAnyDevice). Whether the index exists is the
  // runner's to say: it knows the engine.
  Result<void> device(od::value& v, const Path& at, std::optional<std::size_t>& out) {
    constexpr std::string_view kWhat = "a device index (a non-negative integer) or \"any\"";
    if (Reader::lead(v) == '"') {
      std::string_view s;
      UVCL_TRY(r_.get_string(v, at, s, kWhat));
      if (s != "any") return r_.fail(at, "expected " + std::string(kWhat) + ", got " + json::quote(s));
      out = kAnyDevice;
      return {};
    }
    std::uint64_t d = 0;
    UVCL_TRY(r_.get_uint(v, at, 0, kAnyDevice - 1, d, kWhat));
    out = static_cast<std::size_t>(d);
    return {};
  }

  Result<void> launch(od::value& v, const Path& at) {
    od::object obj;
    UVCL_TRY(r_.get_object(v, at, obj, "a launch object"));
    Launch l;
    const std::size_t index = job_.launches.size();
    bool has_kernel = false, has_args = false, has_global = false;
    auto field = [&](std::string_view key, od::value& f, const Path& p) -> Result<void> {
      if (key == "kernel") {
        std::string_view s;
        UVCL_TRY(r_.get_string(f, p, s, "a kernel name"));
        launch_kernels_.push_back({p.str(), std::string(s)});
        has_kernel = true;
        return {};
      }
      if (key == "args") {
        has_args = true;
        od::array arr;
        UVCL_TRY(r_.get_array(f, p, arr, "an array of arguments"));
        auto element = [&](std::size_t i, od::value& a, const Path& ap) { return arg(a, ap, index, i, l.args); };
        return r_.elements(arr, p, element);
      }
      if (key == "global") {
        has_global = true;
        return sizes(f, p, l.global);
      }
      if (key == "local") return sizes(f, p, l.local);
      if (key == "device") return device(f, p, l.device);
      return r_.get_uint(f, p, 1, kU64Max, l.repeat, kPositive);
    };
    UVCL_TRY(r_.fields(obj, at, {"kernel", "args", "global", "local", "repeat", "device"}, field));
    if (!has_kernel) return r_.fail(at, "missing required key \"kernel\"");
    if (!has_args) return r_.fail(at, "missing required key \"args\"");
    if (!has_global) return r_.fail(at, "missing required key \"global\"");
    if (!l.local.empty() && l.local.size() != l.global.size()) {
      const Path p = at.key("local");
      return r_.fail(p, "expected " + std::to_string(l.global.size()) + " sizes (as many as \"global\"), got " +
                            std::to_string(l.local.size()));
    }
    job_.launches.push_back(std::move(l));
    return {};
  }

  Result<void> sizes(od::value& v, const Path& at, std::vector<std::uint64_t>& out) {
    od::array arr;
    UVCL_TRY(r_.get_array(v, at, arr, "an array of 1 to 3 positive integers"));
    auto element = [&](std::size_t, od::value& e, const Path& p) -> Result<void> {
      std::uint64_t n = 0;
      UVCL_TRY(r_.get_uint(e, p, 1, kU64Max, n, kPositive));
      out.push_back(n);
      return {};
    };
    UVCL_TRY(r_.elements(arr, at, element));
    if (out.empty() || out.size() > 3)
      return r_.fail(at, "expected 1 to 3 sizes, got " + std::to_string(out.size()));
    return {};
  }

  Result<void> arg(od::value& v, const Path& at, std::size_t launch_index, std::size_t arg_index,
                   std::vector<Arg>& args) {
    constexpr std::string_view what = "a buffer name, {TYPE: value} or {\"local\": bytes}";
    Arg a;
    if (Reader::lead(v) == '"') {
      std::string_view s;
      UVCL_TRY(r_.get_string(v, at, s, what));
      a.kind = Arg::Kind::Buffer;
      arg_buffers_.push_back({launch_index, arg_index, {at.str(), std::string(s)}});
      args.push_back(a);
      return {};
    }
    od::object obj;
    UVCL_TRY(r_.get_object(v, at, obj, what));
    int keys = 0;
    auto field = [&](std::string_view key, od::value& f, const Path& p) -> Result<void> {
      if (++keys > 1) return {};  // counted for the message below, never read
      if (key == "local") {
        a.kind = Arg::Kind::Local;
        return r_.get_uint(f, p, 1, kU64Max, a.local_bytes, "a positive integer (bytes)");
      }
      auto t = scalar_type_from_name(key);
      if (!t)
        return r_.fail(p, "unknown key (expected a type name: char, uchar, short, ushort, int, uint, long, ulong, "
                          "half, float, double; or \"local\")");
      a.kind = Arg::Kind::Scalar;
      a.scalar.type = *t;
      a.scalar.bytes = {};
      return read_scalar(r_, f, p, *t, a.scalar.bytes.data());
    };
    UVCL_TRY(r_.fields(obj, at, {}, field));
    if (keys != 1)
      return r_.fail(at, "expected exactly one key (a type name or \"local\"), got " + std::to_string(keys));
    args.push_back(a);
    return {};
  }

  Result<void> outputs(od::value& v, const Path& at) {
    od::array arr;
    UVCL_TRY(r_.get_array(v, at, arr, "an array of buffer names"));
    auto element = [&](std::size_t, od::value& e, const Path& p) -> Result<void> {
      std::string_view s;
      UVCL_TRY(r_.get_string(e, p, s, "a buffer name"));
      output_refs_.push_back({p.str(), std::string(s)});
      return {};
    };
    return r_.elements(arr, at, element);
  }

  Result<void> resolve() {
    for (std::size_t i = 0; i < launch_kernels_.size(); ++i) {
      const Ref& ref = launch_kernels_[i];
      auto it = kernel_index_.find(ref.name);
      if (it == kernel_index_.end()) {
        const std::size_t colon = ref.name.find(':');
        if (colon == std::string::npos) return r_.fail(ref.path, "unknown kernel " + json::quote(ref.name));
        // "FILE:ENTRY": a kernel of the server's library, one job kernel per
        // distinct name; whether it exists is the runner's to say.
        Kernel k;
        k.name = ref.name;
        k.library = ref.name.substr(0, colon);
        k.entry = ref.name.substr(colon + 1);
        if (k.library.empty() || k.entry.empty() || k.entry.find(':') != std::string::npos)
          return r_.fail(ref.path, "expected a kernel name, or FILE:ENTRY for a kernel of the server's library, got " +
                                       json::quote(ref.name));
        job_.kernels.push_back(std::move(k));
        it = kernel_index_.emplace(ref.name, job_.kernels.size() - 1).first;
      }
      job_.launches[i].kernel = it->second;
    }
    for (const ArgRef& a : arg_buffers_) {
      auto it = buffer_index_.find(a.ref.name);
      if (it == buffer_index_.end()) return r_.fail(a.ref.path, "unknown buffer " + json::quote(a.ref.name));
      job_.launches[a.launch].args[a.arg].buffer = it->second;
    }
    // One flag per buffer: a scan of the outputs so far made 200 000
    // outputs cost 2 * 10^10 comparisons (11 s on the server's loop).
    std::vector<bool> is_output(job_.buffers.size(), false);
    for (const Ref& ref : output_refs_) {
      auto it = buffer_index_.find(ref.name);
      if (it == buffer_index_.end()) return r_.fail(ref.path, "unknown buffer " + json::quote(ref.name));
      if (is_output[it->second]) return r_.fail(ref.path, "duplicate output " + json::quote(ref.name));
      is_output[it->second] = true;
      job_.outputs.push_back(it->second);
    }
    return {};
  }

  struct ArgRef {
    std::size_t launch;
    std::size_t arg;
    Ref ref;
  };

  Reader& r_;
  const ParseOptions& options_;
  Job job_;
  std::unordered_map<std::string, std::size_t> buffer_index_;
  std::unordered_map<std::string, std::size_t> kernel_index_;
  std::vector<Ref> launch_kernels_;  // one per launch, in order
  std::vector<ArgRef> arg_buffers_;
  std::vector<Ref> output_refs_;
};

}  // namespace

Result<Job> parse_job(std::string_view json, std::string_view origin, const ParseOptions& options) {
  Reader r(origin, Status::InvalidJob);
  auto root = r.open(json);
  if (!root) return std::move(root).error();
  JobParser parser(r, options);
  auto job = parser.parse(*root);
  if (!job) return job;
  UVCL_TRY(r.finish());
  return job;
}

Result<Job> load_job_file(const std::string& path, const ParseOptions& options) {
  auto text = files::read_regular(path);
  if (!text) return std::move(text).error();
  return parse_job(*text, path, options);
}

}  // namespace uvcl::job
