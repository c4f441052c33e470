#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "../watchdog.hpp"
#include "program/job.hpp"

namespace job_test {

using uvcl::ScalarType;
using uvcl::Status;
using uvcl::job::Arg;
using uvcl::job::Init;
using uvcl::job::Job;
using uvcl::job::ParseOptions;

// A small valid job whose parts the tests swap out.
struct Doc {
  std::string buffers = R"("a": {"type": "float", "count": 4}, "n": {"type": "uint", "count": 1})";
  std::string kernels = R"("k": {"source": "kernel void k(global float* a) {}"})";
  std::string launches = R"({"kernel": "k", "args": ["a"], "global": [4]})";
  std::string extra;  // more top-level members, with a leading comma

  std::string str() const {
    return "{\"buffers\": {" + buffers + "}, \"kernels\": {" + kernels + "}, \"launches\": [" + launches + "]" +
           extra + "}";
  }
};

// The default job plus one more buffer (the default launch uses "a").
std::string with_buffer(const std::string& buffer) {
  Doc d;
  d.buffers += ", " + buffer;
  return d.str();
}
std::string with_kernels(const std::string& kernels) {
  Doc d;
  d.kernels = kernels;
  return d.str();
}
std::string with_outputs(const std::string& outputs) {
  Doc d;
  d.extra = R"(, "outputs": )" + outputs;
  return d.str();
}
std::string with_launch(const std::string& launch) {
  Doc d;
  d.launches = launch;
  return d.str();
}
std::string with_arg(const std::string& arg) {
  return with_launch(R"({"kernel": "k", "args": [)" + arg + R"(], "global": [4]})");
}

uvcl::Result<Job> parse(const std::string& json, const ParseOptions& options = {}) {
  return uvcl::job::parse_job(json, "job.json", options);
}

// The message of a job that must fail as InvalidJob.
std::string job_error(const std::string& json, const ParseOptions& options = {}) {
  auto r = parse(json, options);
  if (r.ok()) return "<parsed>";
  EXPECT_EQ(r.status(), Status::InvalidJob) << r.error().message;
  return r.error().message;
}

template <class T>
T read_le(const std::byte* p) {
  std::uint64_t bits = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) bits |= std::uint64_t(std::to_integer<unsigned>(p[i])) << (8 * i);
  T v;
  if constexpr (sizeof(T) == 8) {
    std::memcpy(&v, &bits, 8);
  } else {
    auto narrow = static_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t,
                                                 std::conditional_t<sizeof(T) == 2, std::uint16_t, std::uint8_t>>>(bits);
    std::memcpy(&v, &narrow, sizeof(T));
  }
  return v;
}

const uvcl::job::Buffer& buffer(const Job& j, const std::string& name) {
  for (const auto& b : j.buffers)
    if (b.name == name) return b;
  ADD_FAILURE() << "no buffer " << name;
  return j.buffers.at(0);
}

template <class T>
std::vector<T> values(const std::vector<std::byte>& bytes) {
  std::vector<T> out;
  for (std::size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T)) out.push_back(read_le<T>(bytes.data() + i));
  return out;
}

// The bytes one scalar argument parses to.
uvcl::Scalar arg_scalar(const std::string& arg) {
  auto r = parse(with_arg(arg));
  EXPECT_TRUE(r.ok()) << arg << ": " << (r.ok() ? "" : r.error().message);
  if (!r.ok()) return {};
  const Arg& a = r->launches.at(0).args.at(0);
  EXPECT_EQ(a.kind, Arg::Kind::Scalar);
  return a.scalar;
}

TEST(Job, ParsesAFullJob) {
  const std::string json = R"({
    "device": 1,
    "buffers": {
      "x": {"type": "float", "count": 3, "init": {"data": [1, 2.5, -0.5]}},
      "y": {"type": "half", "count": 2, "init": {"fill": 1.5}},
      "w": {"type": "ushort", "count": 8, "init": {"safetensors": "w.safetensors", "tensor": "layer.0"}},
      "r": {"type": "uchar", "count": 16, "init": {"file": "raw.bin"}},
      "z": {"type": "long", "count": 5}
    },
    "kernels": {
      "axpy": {"source": "kernel void axpy() {}", "options": "-D X=1"},
      "other": {"file": "k.cl", "entry": "main_fn"}
    },
    "launches": [
      {"kernel": "other", "args": ["z", {"uint": 3}, {"local": 256}, {"double": -2}], "global": [64, 2], "local": [16, 1],
       "repeat": 3},
      {"kernel": "axpy", "args": [], "global": [1, 2, 3]}
    ],
    "outputs": ["z", "x"]
  })";
  auto r = parse(json);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Job& j = *r;
  EXPECT_EQ(j.device, std::optional<std::size_t>(1));

  ASSERT_EQ(j.buffers.size(), 5u);
  EXPECT_EQ(j.buffers[0].name, "x");  // document order
  EXPECT_EQ(j.buffers[0].type, ScalarType::Float);
  EXPECT_EQ(j.buffers[0].count, 3u);
  EXPECT_EQ(j.buffers[0].init.kind, Init::Kind::Data);
  EXPECT_EQ(values<float>(j.buffers[0].init.bytes), (std::vector<float>{1.0f, 2.5f, -0.5f}));

  EXPECT_EQ(j.buffers[1].init.kind, Init::Kind::Fill);
  EXPECT_EQ(values<std::uint16_t>(j.buffers[1].init.bytes), std::vector<std::uint16_t>{uvcl::float_to_half(1.5f)});

  EXPECT_EQ(j.buffers[2].init.kind, Init::Kind::Safetensors);
  EXPECT_EQ(j.buffers[2].init.path, "w.safetensors");
  EXPECT_EQ(j.buffers[2].init.tensor, "layer.0");
  EXPECT_EQ(j.buffers[3].init.kind, Init::Kind::File);
  EXPECT_EQ(j.buffers[3].init.path, "raw.bin");
  EXPECT_EQ(j.buffers[4].name, "z");
  EXPECT_EQ(j.buffers[4].init.kind, Init::Kind::Zero);
  EXPECT_TRUE(j.buffers[4].init.bytes.empty());

  ASSERT_EQ(j.kernels.size(), 2u);
  EXPECT_EQ(j.kernels[0].name, "axpy");
  EXPECT_EQ(j.kernels[0].entry, "axpy");  // defaults to the name
  EXPECT_EQ(j.kernels[0].source, "kernel void axpy() {}");
  EXPECT_EQ(j.kernels[0].options, "-D X=1");
  EXPECT_TRUE(j.kernels[0].file.empty());
  EXPECT_EQ(j.kernels[1].file, "k.cl");
  EXPECT_TRUE(j.kernels[1].source.empty());
  EXPECT_EQ(j.kernels[1].entry, "main_fn");

  ASSERT_EQ(j.launches.size(), 2u);
  const auto& l0 = j.launches[0];
  EXPECT_EQ(l0.kernel, 1u);
  ASSERT_EQ(l0.args.size(), 4u);
  EXPECT_EQ(l0.args[0].kind, Arg::Kind::Buffer);
  EXPECT_EQ(l0.args[0].buffer, 4u);
  EXPECT_EQ(l0.args[1].kind, Arg::Kind::Scalar);
  EXPECT_EQ(l0.args[1].scalar.type, ScalarType::UInt);
  EXPECT_EQ(read_le<std::uint32_t>(l0.args[1].scalar.bytes.data()), 3u);
  EXPECT_EQ(l0.args[2].kind, Arg::Kind::Local);
  EXPECT_EQ(l0.args[2].local_bytes, 256u);
  EXPECT_EQ(l0.args[3].scalar.type, ScalarType::Double);
  EXPECT_EQ(read_le<double>(l0.args[3].scalar.bytes.data()), -2.0);
  EXPECT_EQ(l0.global, (std::vector<std::uint64_t>{64, 2}));
  EXPECT_EQ(l0.local, (std::vector<std::uint64_t>{16, 1}));
  EXPECT_EQ(l0.repeat, 3u);
  EXPECT_EQ(j.launches[1].kernel, 0u);
  EXPECT_EQ(j.launches[1].global, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_TRUE(j.launches[1].local.empty());
  EXPECT_EQ(j.launches[1].repeat, 1u);

  EXPECT_EQ(j.outputs, (std::vector<std::size_t>{4, 0}));
}

TEST(Job, BuildOptionsReplaceTheEnginesOwnOnlyWhenGiven) {
  auto r = parse(with_kernels(R"("k": {"source": "s", "build_options": "", "options": "-D X=1"},
                                 "m": {"source": "s", "build_options": "-cl-fast-relaxed-math"})"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->kernels.size(), 2u);
  EXPECT_EQ(r->kernels[0].build_options, std::optional<std::string>(""));  // given empty: no options at all
  EXPECT_EQ(r->kernels[0].options, "-D X=1");
  EXPECT_EQ(r->kernels[1].build_options, std::optional<std::string>("-cl-fast-relaxed-math"));
  auto d = parse(Doc{}.str());
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_FALSE(d->kernels.at(0).build_options.has_value());  // absent: opencl.build_options
}

TEST(Job, DefaultsWhenOptionalPartsAreAbsent) {
  auto r = parse(Doc{}.str());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->device.has_value());
  EXPECT_TRUE(r->outputs.empty());
  EXPECT_EQ(r->launches.at(0).repeat, 1u);
}

TEST(Job, EmptySectionsAreValid) {
  auto r = parse(R"({"buffers": {}, "kernels": {}, "launches": [], "outputs": []})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->buffers.empty());
}

TEST(Job, LibraryKernelsAreNamedFileColonEntry) {
  // "kernels" may be left out; each distinct FILE:ENTRY is one job kernel,
  // after the job's own, with library = FILE and entry = ENTRY.
  auto r = parse(R"({"buffers": {"a": {"type": "float", "count": 4}},
    "launches": [{"kernel": "blas:saxpy", "args": ["a"], "global": [4]},
                 {"kernel": "blas:scale", "args": ["a"], "global": [4]},
                 {"kernel": "blas:saxpy", "args": ["a"], "global": [4]}]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->kernels.size(), 2u);
  EXPECT_EQ(r->kernels[0].name, "blas:saxpy");
  EXPECT_EQ(r->kernels[0].library, "blas");
  EXPECT_EQ(r->kernels[0].entry, "saxpy");
  EXPECT_TRUE(r->kernels[0].source.empty());
  EXPECT_EQ(r->kernels[1].entry, "scale");
  EXPECT_EQ(r->launches[0].kernel, 0u);
  EXPECT_EQ(r->launches[1].kernel, 1u);
  EXPECT_EQ(r->launches[2].kernel, 0u);
  // A job's own kernel keeps its plain name; library kernels come after it.
  auto mixed = parse(with_launch(R"({"kernel": "k", "args": ["a"], "global": [4]},
                                    {"kernel": "lib:k", "args": ["a"], "global": [4]})"));
  ASSERT_TRUE(mixed.ok()) << mixed.error().message;
  ASSERT_EQ(mixed->kernels.size(), 2u);
  EXPECT_TRUE(mixed->kernels[0].library.empty());
  EXPECT_EQ(mixed->kernels[1].library, "lib");
}

TEST(Job, KeyOrderDoesNotMatter) {
  // Launches and outputs before what they name; init before type and count.
  auto r = parse(R"({
    "outputs": ["b"],
    "launches": [{"global": [2], "args": [{"int": 7}, "b"], "kernel": "k"}],
    "kernels": {"k": {"entry": "e", "source": "s"}},
    "buffers": {"b": {"init": {"data": [-1, 2]}, "count": 2, "type": "short"}}
  })");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->outputs, std::vector<std::size_t>{0});
  EXPECT_EQ(r->launches[0].args[1].buffer, 0u);
  EXPECT_EQ(values<std::int16_t>(r->buffers[0].init.bytes), (std::vector<std::int16_t>{-1, 2}));
}

TEST(Job, InitBytesAreLittleEndian) {
  auto r = parse(with_buffer(R"("u": {"type": "uint", "count": 1, "init": {"fill": 305419896}})"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::vector<std::byte> expect = {std::byte{0x78}, std::byte{0x56}, std::byte{0x34}, std::byte{0x12}};
  EXPECT_EQ(buffer(*r, "u").init.bytes, expect);  // 305419896 == 0x12345678
}

TEST(Job, FloatsTakeIntegersAndNonFiniteStrings) {
  auto r = parse(with_buffer(
      R"("f": {"type": "float", "count": 5, "init": {"data": [3, "nan", "inf", "-inf", -0.0]}},)"
      R"("d": {"type": "double", "count": 1, "init": {"fill": "-inf"}},)"
      R"("h": {"type": "half", "count": 2, "init": {"data": ["nan", 65504]}})"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto f = values<float>(buffer(*r, "f").init.bytes);
  EXPECT_EQ(f[0], 3.0f);
  EXPECT_TRUE(std::isnan(f[1]));
  EXPECT_EQ(f[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(f[3], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(f[4]));
  EXPECT_EQ(values<double>(buffer(*r, "d").init.bytes)[0], -std::numeric_limits<double>::infinity());
  const auto h = values<std::uint16_t>(buffer(*r, "h").init.bytes);
  EXPECT_TRUE(std::isnan(uvcl::half_to_float(h[0])));
  EXPECT_EQ(uvcl::half_to_float(h[1]), 65504.0f);
}

TEST(Job, HalfValuesRoundToNearestEven) {
  for (double v : {0.1, -3.14159, 1e-7, 6e-8, 65519.0, 1.0 / 3}) {
    const std::string text = std::to_string(v);
    const uvcl::Scalar s = arg_scalar(R"({"half": )" + text + "}");
    EXPECT_EQ(s.type, ScalarType::Half);
    EXPECT_EQ(read_le<std::uint16_t>(s.bytes.data()), uvcl::float_to_half(std::stof(text))) << text;
  }
}

TEST(Job, HalfAndFloatOverflowIsAnError) {
  EXPECT_EQ(job_error(with_arg(R"({"half": 65520})")),
            "job.json: launches[0].args[0].half: expected a half (|x| <= 65504), got 65520");
  EXPECT_EQ(job_error(with_arg(R"({"half": -1e6})")),
            "job.json: launches[0].args[0].half: expected a half (|x| <= 65504), got -1e6");
  EXPECT_EQ(job_error(with_arg(R"({"float": 3.5e38})")),
            "job.json: launches[0].args[0].float: expected a float (|x| <= 3.4028235e38), got 3.5e38");
  EXPECT_EQ(job_error(with_arg(R"({"double": 1e400})")),
            R"(job.json: launches[0].args[0].double: expected a double (a number, "nan", "inf" or "-inf"), got 1e400)");
  // The largest float still fits; a double's largest too.
  EXPECT_EQ(read_le<float>(arg_scalar(R"({"float": 3.4028234663852886e38})").bytes.data()),
            std::numeric_limits<float>::max());
  EXPECT_EQ(read_le<double>(arg_scalar(R"({"double": 1.7976931348623157e308})").bytes.data()),
            std::numeric_limits<double>::max());
}

// Every integer type accepts exactly its range: min and max parse to the right
// bytes, one past either end is an error naming the path and the range.
template <class T>
void check_integer_edges(const char* name) {
  SCOPED_TRACE(name);
  using Limits = std::numeric_limits<T>;
  const std::string type = name;
  const std::string lo = std::to_string(Limits::min()), hi = std::to_string(Limits::max());
  for (const std::string& v : {lo, hi}) {
    const uvcl::Scalar s = arg_scalar("{\"" + type + "\": " + v + "}");
    EXPECT_EQ(s.type, uvcl::Scalar::type_of<T>());
    EXPECT_EQ(std::to_string(read_le<T>(s.bytes.data())), v);
  }
  // One past each end, spelled out in decimal (it may not fit any C++ type).
  auto bump = [](const std::string& v) {  // |v| + 1, keeping the sign
    const bool negative = v[0] == '-';
    std::string d = negative ? v.substr(1) : v;
    std::size_t i = d.size();
    while (i > 0 && d[i - 1] == '9') d[--i] = '0';
    if (i == 0) d.insert(0, "1");
    else ++d[i - 1];
    return negative ? "-" + d : d;
  };
  const std::string below = Limits::min() == 0 ? "-1" : bump(lo);
  const std::string above = bump(hi);
  const std::string article = type[0] == 'i' ? "an " : "a ";
  for (const std::string& v : {below, above}) {
    EXPECT_EQ(job_error(with_arg("{\"" + type + "\": " + v + "}")),
              "job.json: launches[0].args[0]." + type + ": expected " + article + type + " (integer " + lo + ".." +
                  hi + "), got " + v);
  }
}

TEST(Job, IntegerRangeEdges) {
  check_integer_edges<std::int8_t>("char");
  check_integer_edges<std::uint8_t>("uchar");
  check_integer_edges<std::int16_t>("short");
  check_integer_edges<std::uint16_t>("ushort");
  check_integer_edges<std::int32_t>("int");
  check_integer_edges<std::uint32_t>("uint");
  check_integer_edges<std::int64_t>("long");
  check_integer_edges<std::uint64_t>("ulong");
}

TEST(Job, IntegerTypesRejectFractionsAndOtherTypes) {
  for (const char* v : {"1.5", "1.0", "1e2", "\"1\"", "true", "null", "[1]"}) {
    const std::string msg = job_error(with_arg(std::string(R"({"int": )") + v + "}"));
    EXPECT_EQ(msg.rfind("job.json: launches[0].args[0].int: expected an int (integer", 0), 0u) << msg;
  }
  EXPECT_EQ(job_error(with_buffer(R"("u": {"type": "uchar", "count": 2, "init": {"data": [1, 300]}})")),
            "job.json: buffers.u.init.data[1]: expected a uchar (integer 0..255), got 300");
  EXPECT_EQ(job_error(with_buffer(R"("u": {"type": "int", "count": 1, "init": {"fill": "nan"}})")),
            R"(job.json: buffers.u.init.fill: expected an int (integer -2147483648..2147483647), got "nan")");
}

struct ErrorCase {
  const char* what;
  std::string json;
  std::string message;  // without the "job.json: " origin
};

TEST(Job, EveryErrorKindNamesItsPath) {
  const std::vector<ErrorCase> cases = {
      // top level
      {"not an object", "[]", "expected a JSON object at the top level, got an array"},
      {"missing buffers", R"({"kernels": {}, "launches": []})", R"(missing required key "buffers")"},
      {"missing launches", R"({"buffers": {}, "kernels": {}})", R"(missing required key "launches")"},
      {"unknown top key", R"({"buffers": {}, "kernels": {}, "launches": [], "outputz": []})",
       "outputz: unknown key (expected one of: device, buffers, kernels, launches, outputs)"},
      {"duplicate top key", R"({"buffers": {}, "buffers": {}, "kernels": {}, "launches": []})", "buffers: duplicate key"},
      {"device negative", R"({"device": -1, "buffers": {}, "kernels": {}, "launches": []})",
       "device: expected a device index (a non-negative integer) or \"any\", got -1"},
      {"device string", R"({"device": "0", "buffers": {}, "kernels": {}, "launches": []})",
       R"(device: expected a device index (a non-negative integer) or "any", got "0")"},
      {"buffers not object", R"({"buffers": [], "kernels": {}, "launches": []})",
       "buffers: expected an object of buffers by name, got an array"},
      {"kernels not object", R"({"buffers": {}, "kernels": 1, "launches": []})",
       "kernels: expected an object of kernels by name, got 1"},
      {"launches not array", R"({"buffers": {}, "kernels": {}, "launches": {}})",
       "launches: expected an array of launches, got an object"},
      {"outputs not array", R"({"buffers": {}, "kernels": {}, "launches": [], "outputs": "a"})",
       R"(outputs: expected an array of buffer names, got "a")"},
      // buffers
      {"buffer not object", with_buffer(R"("b": 4)"),
       R"(buffers.b: expected an object with "type", "count" and optional "init", got 4)"},
      {"duplicate buffer", with_buffer(R"("b": {"type": "int", "count": 1}, "b": {"type": "int", "count": 1})"),
       "buffers.b: duplicate key"},
      {"empty buffer name", with_buffer(R"("": {"type": "int", "count": 1})"), R"(buffers[""]: empty name)"},
      {"missing type", with_buffer(R"("b": {"count": 1})"), R"(buffers.b: missing required key "type")"},
      {"missing count", with_buffer(R"("b": {"type": "int"})"), R"(buffers.b: missing required key "count")"},
      {"unknown type", with_buffer(R"("b": {"type": "f32", "count": 1})"),
       R"(buffers.b.type: expected a type name (char, uchar, short, ushort, int, uint, long, ulong, half, float, double), got "f32")"},
      {"type not string", with_buffer(R"("b": {"type": 4, "count": 1})"), "buffers.b.type: expected a type name, got 4"},
      {"count negative", with_buffer(R"("b": {"type": "int", "count": -1})"),
       "buffers.b.count: expected a positive integer, got -1"},
      {"count zero", with_buffer(R"("b": {"type": "int", "count": 0})"),
       "buffers.b.count: expected a positive integer, got 0"},
      {"count overflow", with_buffer(R"("b": {"type": "double", "count": 4611686018427387904})"),
       "buffers.b.count: 4611686018427387904 elements of double overflow a 64-bit byte size"},
      {"unknown buffer key", with_buffer(R"("b": {"type": "int", "count": 1, "size": 4})"),
       "buffers.b.size: unknown key (expected one of: type, count, init)"},
      // init
      {"init not object", with_buffer(R"("b": {"type": "int", "count": 1, "init": 0})"),
       R"(buffers.b.init: expected an object with one of "fill", "data", "file" or "safetensors", got 0)"},
      {"init empty", with_buffer(R"("b": {"type": "int", "count": 1, "init": {}})"),
       R"(buffers.b.init: expected exactly one of "fill", "data", "file" or "safetensors")"},
      {"init two sources", with_buffer(R"("b": {"type": "int", "count": 1, "init": {"fill": 1, "file": "x"}})"),
       R"(buffers.b.init: expected exactly one of "fill", "data", "file" or "safetensors")"},
      {"init unknown key", with_buffer(R"("b": {"type": "int", "count": 1, "init": {"zero": true}})"),
       "buffers.b.init.zero: unknown key (expected one of: fill, data, file, safetensors, tensor)"},
      {"data too short", with_buffer(R"("b": {"type": "int", "count": 3, "init": {"data": [1, 2]}})"),
       "buffers.b.init.data: expected 3 values (count), got 2"},
      {"data too long", with_buffer(R"("b": {"type": "int", "count": 1, "init": {"data": [1, 2]}})"),
       "buffers.b.init.data: expected 1 values (count), got 2"},
      {"data not array", with_buffer(R"("b": {"type": "int", "count": 1, "init": {"data": 1}})"),
       "buffers.b.init.data: expected an array of values, got 1"},
      {"data bad value", with_buffer(R"("b": {"type": "float", "count": 2, "init": {"data": [1, "x"]}})"),
       R"(buffers.b.init.data[1]: expected a float (a number, "nan", "inf" or "-inf"), got "x")"},
      {"fill bad value", with_buffer(R"("b": {"type": "char", "count": 2, "init": {"fill": -129}})"),
       "buffers.b.init.fill: expected a char (integer -128..127), got -129"},
      {"safetensors without tensor", with_buffer(R"("b": {"type": "int", "count": 1, "init": {"safetensors": "w"}})"),
       R"(buffers.b.init: missing required key "tensor" (the tensor to read from the safetensors file))"},
      {"tensor without safetensors", with_buffer(R"("b": {"type": "int", "count": 1, "init": {"fill": 0, "tensor": "t"}})"),
       R"(buffers.b.init.tensor: only allowed with "safetensors")"},
      {"empty file path", with_buffer(R"("b": {"type": "int", "count": 1, "init": {"file": ""}})"),
       R"(buffers.b.init.file: expected a file path, got "")"},
      // kernels
      {"kernel not object", with_kernels(R"("k": "src")"),
       R"(kernels.k: expected an object with "source" or "file", got "src")"},
      {"kernel without source", with_kernels(R"("k": {"entry": "k"})"),
       R"(kernels.k: expected exactly one of "source" or "file")"},
      {"kernel with both", with_kernels(R"("k": {"source": "s", "file": "f.cl"})"),
       R"(kernels.k: expected exactly one of "source" or "file")"},
      {"kernel unknown key", with_kernels(R"("k": {"source": "s", "args": []})"),
       "kernels.k.args: unknown key (expected one of: source, file, entry, options, build_options)"},
      {"kernel source not string", with_kernels(R"("k": {"source": ["s"]})"),
       "kernels.k.source: expected a string, got an array"},
      {"kernel empty entry", with_kernels(R"("k": {"source": "s", "entry": ""})"),
       R"(kernels.k.entry: expected a kernel function name, got "")"},
      {"kernel options not string", with_kernels(R"("k": {"source": "s", "options": 1})"),
       "kernels.k.options: expected a string, got 1"},
      {"kernel build_options not string", with_kernels(R"("k": {"source": "s", "build_options": false})"),
       "kernels.k.build_options: expected a string, got false"},
      {"duplicate kernel", with_kernels(R"("k": {"source": "s"}, "k": {"source": "t"})"),
       "kernels.k: duplicate key"},
      {"kernel name with a colon", with_kernels(R"("a:b": {"source": "s"})"),
       R"(kernels["a:b"]: a kernel name may not contain ':' (a launch's "FILE:ENTRY" names a kernel of the server's library))"},
      // launches
      {"launch not object", with_launch("1"), "launches[0]: expected a launch object, got 1"},
      {"launch missing kernel", with_launch(R"({"args": [], "global": [1]})"),
       R"(launches[0]: missing required key "kernel")"},
      {"launch missing args", with_launch(R"({"kernel": "k", "global": [1]})"),
       R"(launches[0]: missing required key "args")"},
      {"launch missing global", with_launch(R"({"kernel": "k", "args": []})"),
       R"(launches[0]: missing required key "global")"},
      {"unknown kernel", with_launch(R"({"kernel": "kk", "args": [], "global": [1]})"),
       R"(launches[0].kernel: unknown kernel "kk")"},
      {"library kernel without entry", with_launch(R"({"kernel": "lib:", "args": [], "global": [1]})"),
       R"(launches[0].kernel: expected a kernel name, or FILE:ENTRY for a kernel of the server's library, got "lib:")"},
      {"library kernel without file", with_launch(R"({"kernel": ":k", "args": [], "global": [1]})"),
       R"(launches[0].kernel: expected a kernel name, or FILE:ENTRY for a kernel of the server's library, got ":k")"},
      {"library kernel with two colons", with_launch(R"({"kernel": "a:b:c", "args": [], "global": [1]})"),
       R"(launches[0].kernel: expected a kernel name, or FILE:ENTRY for a kernel of the server's library, got "a:b:c")"},
      {"launch unknown key", with_launch(R"({"kernel": "k", "args": [], "global": [1], "grid": [1]})"),
       "launches[0].grid: unknown key (expected one of: kernel, args, global, local, repeat, device)"},
      {"global empty", with_launch(R"({"kernel": "k", "args": [], "global": []})"),
       "launches[0].global: expected 1 to 3 sizes, got 0"},
      {"global four", with_launch(R"({"kernel": "k", "args": [], "global": [1, 1, 1, 1]})"),
       "launches[0].global: expected 1 to 3 sizes, got 4"},
      {"global zero", with_launch(R"({"kernel": "k", "args": [], "global": [8, 0]})"),
       "launches[0].global[1]: expected a positive integer, got 0"},
      {"global not array", with_launch(R"({"kernel": "k", "args": [], "global": 8})"),
       "launches[0].global: expected an array of 1 to 3 positive integers, got 8"},
      {"local length", with_launch(R"({"kernel": "k", "args": [], "global": [8, 8], "local": [4]})"),
       R"(launches[0].local: expected 2 sizes (as many as "global"), got 1)"},
      {"local zero", with_launch(R"({"kernel": "k", "args": [], "global": [8], "local": [0]})"),
       "launches[0].local[0]: expected a positive integer, got 0"},
      {"repeat zero", with_launch(R"({"kernel": "k", "args": [], "global": [8], "repeat": 0})"),
       "launches[0].repeat: expected a positive integer, got 0"},
      {"repeat fraction", with_launch(R"({"kernel": "k", "args": [], "global": [8], "repeat": 1.5})"),
       "launches[0].repeat: expected a positive integer, got 1.5"},
      {"second launch", with_launch(R"({"kernel": "k", "args": [], "global": [1]}, {"kernel": "x", "args": [], "global": [1]})"),
       R"(launches[1].kernel: unknown kernel "x")"},
      // args
      {"unknown buffer arg", with_arg(R"("a", "x")"), R"(launches[0].args[1]: unknown buffer "x")"},
      {"arg number", with_arg("3"),
       R"(launches[0].args[0]: expected a buffer name, {TYPE: value} or {"local": bytes}, got 3)"},
      {"arg no key", with_arg("{}"), R"(launches[0].args[0]: expected exactly one key (a type name or "local"), got 0)"},
      {"arg two keys", with_arg(R"({"int": 1, "uint": 2})"),
       R"(launches[0].args[0]: expected exactly one key (a type name or "local"), got 2)"},
      {"arg unknown type", with_arg(R"({"int32": 1})"),
       R"(launches[0].args[0].int32: unknown key (expected a type name: char, uchar, short, ushort, int, uint, long, ulong, half, float, double; or "local"))"},
      {"arg uchar range", with_arg(R"({"uchar": 300})"),
       "launches[0].args[0].uchar: expected a uchar (integer 0..255), got 300"},
      {"arg local zero", with_arg(R"({"local": 0})"), "launches[0].args[0].local: expected a positive integer (bytes), got 0"},
      {"arg float string", with_arg(R"({"float": "pi"})"),
       R"(launches[0].args[0].float: expected a float (a number, "nan", "inf" or "-inf"), got "pi")"},
      // outputs
      {"unknown output", with_outputs(R"(["a", "q"])"),
       R"(outputs[1]: unknown buffer "q")"},
      {"duplicate output", with_outputs(R"(["a", "n", "a"])"),
       R"(outputs[2]: duplicate output "a")"},
      {"output not string", with_outputs(R"([0])"),
       "outputs[0]: expected a buffer name, got 0"},
      // names that are not identifiers are quoted in paths
      {"odd name", with_buffer(R"("my buf": {"type": "int", "count": 0})"),
       R"(buffers["my buf"].count: expected a positive integer, got 0)"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(job_error(c.json), "job.json: " + c.message) << c.json;
  }
}

TEST(Job, FilesCanBeForbidden) {
  const ParseOptions no_files{false};
  const std::string kernel_file = with_kernels(R"("k": {"file": "k.cl"})");
  const std::string init_file = with_buffer(R"("b": {"type": "int", "count": 1, "init": {"file": "b.bin"}})");
  const std::string safetensors =
      with_buffer(R"("b": {"type": "int", "count": 1, "init": {"safetensors": "w.st", "tensor": "t"}})");
  for (const std::string& json : {kernel_file, init_file, safetensors}) ASSERT_TRUE(parse(json).ok()) << json;
  EXPECT_EQ(job_error(kernel_file, no_files), "job.json: kernels.k.file: files are not allowed here");
  EXPECT_EQ(job_error(init_file, no_files), "job.json: buffers.b.init.file: files are not allowed here");
  EXPECT_EQ(job_error(safetensors, no_files), "job.json: buffers.b.init.safetensors: files are not allowed here");
  // Inline content is still fine.
  EXPECT_TRUE(parse(Doc{}.str(), no_files).ok());
}

TEST(Job, MalformedJsonReportsTheByteOffset) {
  std::string json = Doc{}.str();
  json.insert(json.find(", \"kernels\""), ",");  // a doubled comma
  const std::size_t offset = json.find(",,") + 1;
  const std::string msg = job_error(json);
  EXPECT_EQ(msg.rfind("job.json: malformed JSON at byte " + std::to_string(offset) + " ", 0), 0u) << msg;

  const std::string bad_number = with_buffer(R"("b": {"type": "int", "count": 1, "init": {"data": [-]}})");
  EXPECT_EQ(job_error(bad_number).rfind("job.json: malformed JSON at byte " + std::to_string(bad_number.find("-]")), 0),
            0u);
  // Inside an init read in the second pass, too.
  const std::string bad_init = with_buffer(R"("b": {"init": {"data": [1 2]}, "type": "int", "count": 2})");
  EXPECT_EQ(job_error(bad_init).rfind("job.json: malformed JSON at byte " + std::to_string(bad_init.find(" 2]") + 1), 0),
            0u)
      << job_error(bad_init);
  for (const std::string tail : {" []", " {}", "}", ",", " x"}) {
    const std::string trailing = Doc{}.str() + tail;
    const std::size_t at = trailing.find_first_not_of(' ', Doc{}.str().size());
    EXPECT_EQ(job_error(trailing), "job.json: malformed JSON at byte " + std::to_string(at) + " (line 1, column " +
                                       std::to_string(at + 1) + "): unexpected content after the top-level object");
  }
  // A truncated document: the error points at its end.
  const std::string cut = Doc{}.str().substr(0, Doc{}.str().size() - 1);
  EXPECT_EQ(job_error(cut).rfind("job.json: malformed JSON at byte " + std::to_string(cut.size()) + " ", 0), 0u)
      << job_error(cut);
}

TEST(Job, LargeDataArrays) {
  constexpr int n = 100000;
  std::string data;
  for (int i = 0; i < n; ++i) data += (i ? "," : "") + std::to_string(i * 3 - n);
  auto r = parse(with_buffer(R"("big": {"type": "int", "count": )" + std::to_string(n) + R"(, "init": {"data": [)" +
                             data + "]}}"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto v = values<std::int32_t>(buffer(*r, "big").init.bytes);
  ASSERT_EQ(v.size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) ASSERT_EQ(v[i], i * 3 - n);
}

std::string temp_path(const std::string& name) { return testing::TempDir() + "uvcl_job_test_" + name; }

TEST(JobFile, LoadsAndNamesTheFileInErrors) {
  const std::string path = temp_path("job.json");
  std::ofstream(path) << with_arg(R"({"uchar": 256})");
  auto r = uvcl::job::load_job_file(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Status::InvalidJob);
  EXPECT_EQ(r.error().message, path + ": launches[0].args[0].uchar: expected a uchar (integer 0..255), got 256");

  std::ofstream(path) << Doc{}.str();
  auto ok = uvcl::job::load_job_file(path);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  // allow_files reaches through load_job_file as well.
  std::ofstream(path) << with_kernels(R"("k": {"file": "k.cl"})");
  EXPECT_FALSE(uvcl::job::load_job_file(path, ParseOptions{false}).ok());
}

TEST(JobFile, UnreadableIsAnIoErrorNamingThePath) {
  const std::string missing = temp_path("missing.json");
  std::remove(missing.c_str());
  auto r = uvcl::job::load_job_file(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Status::Io);
  EXPECT_EQ(r.error().message.rfind(missing + ": cannot read: ", 0), 0u) << r.error().message;
}

TEST(JobFile, OnlyARegularFileIsRead) {
  uvcl::testing::Watchdog wd("job FIFO", 30);  // a FIFO blocked in open()
  const std::string fifo = temp_path("job-fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = uvcl::job::load_job_file(fifo);
  std::remove(fifo.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Status::Io);
  EXPECT_EQ(r.error().message, fifo + ": cannot read: not a regular file (a FIFO)");
  r = uvcl::job::load_job_file("/dev/zero");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "/dev/zero: cannot read: not a regular file (a character device)");
}

TEST(Examples, EveryExampleJobParses) {
  const std::filesystem::path dir = std::filesystem::path(UVCL_SOURCE_ROOT) / "examples" / "jobs";
  std::size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++seen;
    auto r = uvcl::job::load_job_file(entry.path().string());
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    if (!r.ok()) continue;
    EXPECT_FALSE(r->launches.empty()) << entry.path();
    EXPECT_FALSE(r->outputs.empty()) << entry.path();
    // Examples run under `uvcl serve` too: nothing may need a file.
    EXPECT_TRUE(uvcl::job::load_job_file(entry.path().string(), ParseOptions{false}).ok()) << entry.path();
  }
  EXPECT_GE(seen, 2u) << dir;
}

// 200 000 outputs with one duplicate at the end: the duplicate check was a
// scan of the outputs so far, 2 * 10^10 comparisons (11 s on a server's
// loop). One flag per buffer makes it linear: well under a second.
TEST(Job, DuplicateOutputCheckIsLinear) {
  constexpr int kN = 200000;
  std::string buffers, outputs;
  buffers.reserve(kN * 40);
  outputs.reserve(kN * 10);
  for (int i = 0; i < kN; ++i) {
    buffers += (i ? ", \"b" : "\"b") + std::to_string(i) + R"(": {"type": "char", "count": 1})";
    outputs += (i ? ", \"b" : "\"b") + std::to_string(i) + "\"";
  }
  outputs += ", \"b0\"";
  const std::string doc = "{\"buffers\": {" + buffers + R"(}, "kernels": {}, "launches": [], "outputs": [)" + outputs + "]}";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = uvcl::job::parse_job(doc, "job.json");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("outputs[200000]: duplicate output \"b0\""), std::string::npos) << r.error().message;
  // A guard, not a timing target: the quadratic check made 2e10 string
  // comparisons here (minutes); the linear one takes well under a second,
  // a few under sanitizers on a loaded machine.
  EXPECT_LT(secs, 30.0) << "quadratic duplicate check?";
}

}  // namespace job_test
