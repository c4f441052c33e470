// Kernel parameters uvcl cannot pass an argument for (images, samplers,
// structs by value, typedef names) are refused at launch, naming the
// parameter, its type and why. Before, a buffer given for an image2d_t
// crashed PoCL on the loop thread, and a 4-byte scalar given for a struct
// let the kernel read host memory past the argument.
#include "engine_fixture.hpp"
#include "../watchdog.hpp"

namespace uvcl::testing {
namespace {

const char* kOpaqueParams = R"CL(
typedef struct { float a; int b; } pair_t;
typedef uint u32;
__kernel void img(__read_only image2d_t src, __global float* out) {
  out[get_global_id(0)] = read_imagef(src, (int2)(0, 0)).x;
}
__kernel void smp(sampler_t s, __global float* out) { out[0] = 1.0f; }
__kernel void by_value(pair_t p, __global float* out) { out[get_global_id(0)] = p.a + (float)p.b; }
__kernel void named(u32 n, __global float* out) { out[0] = (float)n; }
__kernel void plain(uint n, __global float* out) { out[0] = (float)n; }
)CL";

class ParamTypes : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    program_ = compile(kOpaqueParams);
    out_ = eng().allocate(0, 64 * sizeof(float)).value();
  }
  // The error a launch of `entry` with `first` as its first argument gets.
  Result<void> launch_with(const char* entry, KernelArg first) {
    Kernel k = kernel(program_, entry);
    return eng().launch(Launch{k, {first, KernelArg::of(out_)}, {64}});
  }
  Program program_;
  Buffer out_;
};

void expect_refused(const Result<void>& r, std::initializer_list<const char*> words) {
  ASSERT_FALSE(r.ok()) << "launched";
  EXPECT_EQ(r.status(), Status::IncorrectKernelArg) << r.error().to_string();
  for (const char* w : words)
    EXPECT_NE(r.error().message.find(w), std::string::npos) << w << " not in: " << r.error().message;
}

TEST_F(ParamTypes, BufferForAnImageIsRefused) {
  Watchdog wd("buffer for an image", 60);
  Buffer b = eng().allocate(0, 4096).value();
  expect_refused(launch_with("img", KernelArg::of(b)), {"argument 0", "image2d_t src", "an image"});
  // The engine still works: the refusal left nothing half done.
  EXPECT_TRUE(eng().finish().ok());
  auto params = eng().kernel_params(kernel(program_, "img")).value();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_NE(params[0].unsupported, nullptr);
  EXPECT_EQ(params[1].unsupported, nullptr);
}

TEST_F(ParamTypes, ScalarForAStructIsRefused) {
  Watchdog wd("scalar for a struct", 60);
  expect_refused(launch_with("by_value", KernelArg::value<std::uint32_t>(7)),
                 {"argument 0", "pair_t p", "size uvcl cannot determine"});
  expect_refused(launch_with("by_value", KernelArg::value<std::uint64_t>(7)), {"pair_t p"});
}

TEST_F(ParamTypes, SamplerAndTypedefNamesAreRefused) {
  Watchdog wd("sampler, typedef", 60);
  expect_refused(launch_with("smp", KernelArg::value<std::uint32_t>(0)), {"sampler_t s", "a sampler"});
  // A typedef of uint: OpenCL reports the name, not the size behind it.
  expect_refused(launch_with("named", KernelArg::value<std::uint32_t>(3)), {"u32 n", "typedef"});
  EXPECT_TRUE(launch_with("plain", KernelArg::value<std::uint32_t>(3)).ok());
  EXPECT_TRUE(eng().finish().ok());
}

TEST_F(ParamTypes, CheckLaunchRefusesToo) {
  Kernel k = kernel(program_, "by_value");
  auto r = eng().check_launch(Launch{k, {KernelArg::value(1.0f), KernelArg::of(out_)}, {64}});
  expect_refused(r, {"pair_t p"});
}

// A declared access must keep the kind of argument: declaring a buffer
// access for a scalar parameter (or Scalar for a pointer) would pass a
// value where the kernel dereferences a pointer.
TEST_F(ParamTypes, DeclaredAccessMustKeepTheKind) {
  auto k = eng().kernel(program_, "plain", {ParamAccess::ReadOnly, ParamAccess::Written});
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status(), Status::IncorrectKernelArg);
  EXPECT_NE(k.error().message.find("parameter 0 (uint n) takes a scalar"), std::string::npos) << k.error().message;
  k = eng().kernel(program_, "plain", {ParamAccess::Scalar, ParamAccess::Scalar});
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.error().message.find("takes a buffer"), std::string::npos) << k.error().message;
  EXPECT_TRUE(eng().kernel(program_, "plain", {ParamAccess::Scalar, ParamAccess::WriteOnly}).ok());
}

}  // namespace
}  // namespace uvcl::testing
