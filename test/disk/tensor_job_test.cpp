// Jobs whose buffers load tensors from safetensors files: bit-exact loads,
// a computation on two tensors, and the runner's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "program/disk_pool.hpp"
#include "program/job_runner.hpp"
#include "program/job.hpp"
#include "st_util.hpp"
#include "uvcl/engine.hpp"

namespace uvcl::tensor_job_test {

using uvcl::disk_testing::bytes_of;
using uvcl::disk_testing::safetensors_file;
using uvcl::disk_testing::TempDir;
using uvcl::disk_testing::TensorSpec;

class TensorJob : public ::testing::Test {
 protected:
  void SetUp() override {
    auto e = Engine::create(Config{});
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    engine_ = std::move(e.value());
    live_ = disk::Mapping::live();
  }
  void TearDown() override {
    engine_.reset();
    EXPECT_EQ(disk::Mapping::live(), live_);
  }

  Result<job::RunResult> run(const std::string& json, bool allow_files = true) {
    auto j = job::parse_job(json, "job.json");
    if (!j) return std::move(j).error();
    job::RunOptions o;
    o.base_dir = dir_.path();
    o.allow_files = allow_files;
    auto r = job::run_job_sync(*engine_, std::move(j.value()), o);
    // Everything the job mapped is unmapped once its uploads are final (a
    // job that failed may leave uploads in flight: they keep their mapping).
    EXPECT_TRUE(engine_->finish().ok());
    EXPECT_EQ(disk::Mapping::live(), live_);
    return r;
  }
  std::string error_of(const std::string& json, Status want = Status::InvalidJob) {
    auto r = run(json);
    EXPECT_FALSE(r.ok());
    if (r.ok()) return {};
    EXPECT_EQ(r.status(), want) << r.error().to_string();
    return r.error().message;
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::uint64_t live_ = 0;
};

// Floats with every awkward bit pattern: NaN payloads, -0, denormals, inf.
std::vector<float> awkward_floats(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::ldexp(static_cast<float>(i) - 13.5f, static_cast<int>(i % 9) - 4);
  const std::uint32_t bits[] = {0x7fc12345u, 0xffa00001u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x7f800000u};
  for (std::size_t k = 0; k < std::size(bits) && k < n; ++k) std::memcpy(&v[k * 3], &bits[k], 4);
  return v;
}

TEST_F(TensorJob, LoadsTwoTensorsAndComputesWithThem) {
  const std::vector<float> a = awkward_floats(32);
  std::vector<float> b(32);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 1.0f / static_cast<float>(i + 3);
  std::vector<std::int32_t> ints(16);
  for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<std::int32_t>(i * 0x9e3779b9u);
  const std::vector<std::uint8_t> flags = {1, 0, 0, 1, 1, 1, 0, 1};
  dir_.write("w.safetensors",
             safetensors_file({{"a", "F32", {4, 8}, bytes_of(a)},
                               {"i", "I32", {16}, bytes_of(ints)},
                               {"b", "F32", {32}, bytes_of(b)},
                               {"flags", "BOOL", {8}, bytes_of(flags)}},
                              R"({"format":"test"})"));
  const std::string job = R"({
    "buffers": {
      "a": {"type": "float", "count": 32, "init": {"safetensors": "w.safetensors", "tensor": "a"}},
      "b": {"type": "float", "count": 32, "init": {"safetensors": "w.safetensors", "tensor": "b"}},
      "i": {"type": "int", "count": 16, "init": {"safetensors": "w.safetensors", "tensor": "i"}},
      "flags": {"type": "uchar", "count": 8, "init": {"safetensors": "w.safetensors", "tensor": "flags"}},
      "c": {"type": "float", "count": 32}
    },
    "kernels": {
      "mul": {"source": "kernel void mul(global const float* a, global const float* b, global float* c) { size_t i = get_global_id(0); c[i] = a[i] * b[i]; }"}
    },
    "launches": [{"kernel": "mul", "args": ["a", "b", "c"], "global": [32]}],
    "outputs": ["a", "b", "i", "flags", "c"]
  })";
  auto r = run(job);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->outputs.size(), 5u);
  EXPECT_EQ(r->outputs[0].data, bytes_of(a));  // bit-exact, NaN payloads included
  EXPECT_EQ(r->outputs[1].data, bytes_of(b));
  EXPECT_EQ(r->outputs[2].data, bytes_of(ints));
  EXPECT_EQ(r->outputs[3].data, bytes_of(flags));
  // The product of finite, normal values is exact IEEE single precision
  // (the build's -cl-mad-enable has no multiply-add to fuse here).
  std::vector<float> c(32);
  std::memcpy(c.data(), r->outputs[4].data.data(), 128);
  for (std::size_t i = 0; i < 32; ++i) {
    const float want = a[i] * b[i];
    if (!std::isfinite(want) || std::fpclassify(a[i]) == FP_SUBNORMAL || std::fpclassify(want) == FP_SUBNORMAL)
      continue;  // -cl-finite-math-only; devices may flush denormals
    EXPECT_EQ(c[i], want) << i;
  }
}

TEST_F(TensorJob, EveryMappedDTypeLoadsExactly) {
  std::vector<TensorSpec> specs;
  std::string buffers;
  std::string outputs;
  auto add = [&](const char* name, const char* dtype, const char* type, std::vector<std::byte> data, std::size_t n) {
    specs.push_back({name, dtype, {n}, std::move(data)});
    if (!buffers.empty()) buffers += ",";
    buffers += std::string("\"") + name + "\": {\"type\": \"" + type + "\", \"count\": " + std::to_string(n) +
               ", \"init\": {\"safetensors\": \"all.safetensors\", \"tensor\": \"" + name + "\"}}";
    outputs += std::string(outputs.empty() ? "" : ",") + "\"" + name + "\"";
  };
  auto pattern = [](std::size_t bytes) {
    std::vector<std::byte> v(bytes);
    for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<std::byte>((i * 151 + 7) & 0xff);
    return v;
  };
  add("u8", "U8", "uchar", pattern(5), 5);
  add("i8", "I8", "char", pattern(7), 7);
  add("i16", "I16", "short", pattern(6), 3);
  add("u16", "U16", "ushort", pattern(10), 5);
  add("u32", "U32", "uint", pattern(12), 3);
  add("i64", "I64", "long", pattern(16), 2);
  add("u64", "U64", "ulong", pattern(24), 3);
  const bool fp64 = engine_->device(0)->fp64, fp16 = engine_->device(0)->fp16;
  if (fp64) add("f64", "F64", "double", bytes_of(std::vector<double>{1.5, -0.0, 1e300}), 3);
  if (fp16) add("f16", "F16", "half", bytes_of(std::vector<std::uint16_t>{0x3c00, 0x8001, 0x7bff, 0xc000}), 4);
  dir_.write("all.safetensors", safetensors_file(specs));
  const std::string job = "{\"buffers\": {" + buffers + "}, \"kernels\": {}, \"launches\": [], \"outputs\": [" +
                          outputs + "]}";
  auto r = run(job);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->outputs.size(), specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(r->outputs[i].data, specs[i].data) << specs[i].name;
}

std::string one_buffer_job(const std::string& type, std::uint64_t count, const std::string& file,
                           const std::string& tensor) {
  return R"({"buffers": {"w": {"type": ")" + type + R"(", "count": )" + std::to_string(count) +
         R"(, "init": {"safetensors": ")" + file + R"(", "tensor": ")" + tensor +
         R"("}}}, "kernels": {}, "launches": [], "outputs": ["w"]})";
}

TEST_F(TensorJob, ErrorsNameTheBufferTheFileAndTheTensor) {
  const std::string path = dir_.write(
      "w.safetensors",
      safetensors_file({{"w1", "F32", {2, 3}, std::vector<std::byte>(24)},
                        {"h", "F16", {4}, std::vector<std::byte>(8)},
                        {"bf", "BF16", {4}, std::vector<std::byte>(8)}}));
  EXPECT_EQ(error_of(one_buffer_job("float", 6, "w.safetensors", "w9")),
            "buffers.w.init.tensor: no tensor \"w9\" in " + path + " (it holds \"w1\", \"h\", \"bf\")");
  EXPECT_EQ(error_of(one_buffer_job("int", 6, "w.safetensors", "w1")),
            "buffers.w.init: tensor \"w1\" in " + path + " is F32 (OpenCL float), but the buffer's type is int");
  EXPECT_EQ(error_of(one_buffer_job("float", 5, "w.safetensors", "w1")),
            "buffers.w.init: tensor \"w1\" in " + path +
                " has 6 elements (shape [2, 3]), but the buffer's count is 5");
  EXPECT_EQ(error_of(one_buffer_job("ushort", 4, "w.safetensors", "bf")),
            "buffers.w.init: tensor \"bf\" in " + path +
                " is BF16, which has no OpenCL C type; convert it (to F32 or F16) first");
  if (engine_->device(0)->fp16) {
    EXPECT_EQ(error_of(one_buffer_job("ushort", 4, "w.safetensors", "h")),
              "buffers.w.init: tensor \"h\" in " + path + " is F16 (OpenCL half), but the buffer's type is ushort");
  }
}

TEST_F(TensorJob, MissingAndMalformedFiles) {
  const std::string missing = dir_.path() + "/nope.safetensors";
  EXPECT_EQ(error_of(one_buffer_job("float", 1, "nope.safetensors", "w"), Status::Io),
            "buffers.w.init: " + missing + ": cannot read: No such file or directory");
  const std::string bad = dir_.write(
      "bad.safetensors",
      uvcl::disk_testing::with_header(R"({"w1": {"dtype": "F32", "shape": [25], "data_offsets": [0, 100]}})",
                                      std::vector<std::byte>(64)));
  EXPECT_EQ(error_of(one_buffer_job("float", 25, "bad.safetensors", "w1")),
            "buffers.w.init: " + bad + ": tensor \"w1\": data_offsets [0, 100] past the end of the data (64 bytes)");
}

TEST_F(TensorJob, FailureAfterAnUploadStartedKeepsItsMappingUntilDone) {
  std::vector<float> big(1 << 20, 3.0f);
  dir_.write("w.safetensors", safetensors_file({{"a", "F32", {big.size()}, bytes_of(big)},
                                                {"b", "F32", {3}, std::vector<std::byte>(12)}}));
  const std::string job = R"({"buffers": {
      "a": {"type": "float", "count": 1048576, "init": {"safetensors": "w.safetensors", "tensor": "a"}},
      "b": {"type": "float", "count": 4, "init": {"safetensors": "w.safetensors", "tensor": "b"}}},
    "kernels": {}, "launches": [], "outputs": ["a"]})";
  const std::string m = error_of(job);
  EXPECT_NE(m.find("buffers.b.init: tensor \"b\""), std::string::npos) << m;
  EXPECT_NE(m.find("has 3 elements (shape [3]), but the buffer's count is 4"), std::string::npos) << m;
}

TEST_F(TensorJob, FilesNotAllowed) {
  dir_.write("w.safetensors", safetensors_file({{"w", "F32", {1}, std::vector<std::byte>(4)}}));
  // Parsed with files allowed, run where they are not (the runner's own check).
  auto r = run(one_buffer_job("float", 1, "w.safetensors", "w"), /*allow_files=*/false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Status::InvalidJob);
  EXPECT_EQ(r.error().message, "buffers.w.init.safetensors: files are not allowed here");
}

TEST_F(TensorJob, AbsolutePathsAndOneMappingForManyTensors) {
  std::vector<TensorSpec> specs;
  std::string buffers, outputs;
  const std::string path = dir_.path() + "/many.safetensors";
  for (int i = 0; i < 20; ++i) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(i + 1));
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = -(static_cast<std::int64_t>(k) << i);
    specs.push_back({"t" + std::to_string(i), "I64", {v.size()}, bytes_of(v)});
    buffers += std::string(i ? "," : "") + "\"t" + std::to_string(i) + "\": {\"type\": \"long\", \"count\": " +
               std::to_string(v.size()) + ", \"init\": {\"safetensors\": \"" + path + "\", \"tensor\": \"t" +
               std::to_string(i) + "\"}}";
    outputs += std::string(i ? "," : "") + "\"t" + std::to_string(i) + "\"";
  }
  dir_.write("many.safetensors", safetensors_file(specs));
  auto r = run("{\"buffers\": {" + buffers + "}, \"kernels\": {}, \"launches\": [], \"outputs\": [" + outputs + "]}");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  for (std::size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(r->outputs[i].data, specs[i].data) << i;
}

}  // namespace uvcl::tensor_job_test
