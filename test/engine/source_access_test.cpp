// Parameter access inferred from the kernel's source (cl/source_access.hpp)
// on top of argument info: a __global pointer the body only stores through
// is WriteOnly, and writes_each_item says whether every work-item stores its
// own element. Declarations still override it within the parameter's kind.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine_fixture.hpp"

namespace uvcl::source_access_test {

class SourceAccessEngine : public uvcl::testing::EngineTest {
 protected:
  std::vector<KernelParam> params(const std::string& src, const std::string& entry,
                                  std::vector<ParamAccess> declared = {}) {
    auto p = eng().compile_sync(0, src);
    EXPECT_TRUE(p.ok()) << p.error().to_string();
    if (!p.ok()) return {};
    auto k = eng().kernel(p.value(), entry, std::move(declared));
    EXPECT_TRUE(k.ok()) << k.error().to_string();
    if (!k.ok()) return {};
    auto params = eng().kernel_params(k.value());
    EXPECT_TRUE(params.ok());
    return params.ok() ? params.value() : std::vector<KernelParam>{};
  }
};

const char* kCopy = R"CL(
__kernel void copy(__global const float* in, __global float* out, __global float* both, uint n) {
  size_t i = get_global_id(0);
  out[i] = in[i];
  both[i] = both[i] + 1.0f;
}
__kernel void guarded(__global const float* in, __global float* out, uint n) {
  size_t i = get_global_id(0);
  if (i < n) out[i] = in[i];
}
)CL";

TEST_F(SourceAccessEngine, StoredOnlyIsWriteOnly) {
  auto p = params(kCopy, "copy");
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].access, ParamAccess::ReadOnly);
  EXPECT_EQ(p[1].access, ParamAccess::WriteOnly);
  EXPECT_TRUE(p[1].writes_each_item);
  EXPECT_EQ(p[2].access, ParamAccess::Written);
  EXPECT_FALSE(p[2].writes_each_item);
  EXPECT_EQ(p[3].access, ParamAccess::Scalar);

  auto g = params(kCopy, "guarded");
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[1].access, ParamAccess::WriteOnly);
  EXPECT_FALSE(g[1].writes_each_item);
}

TEST_F(SourceAccessEngine, MacrosKeepArgumentInfosAccess) {
  auto p = params(std::string("#define STORE(x) x\n") + kCopy, "copy");
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[1].access, ParamAccess::Written);
  EXPECT_FALSE(p[1].writes_each_item);
}

TEST_F(SourceAccessEngine, DeclaredAccessStillOverrides) {
  auto w = params(kCopy, "copy", {ParamAccess::ReadOnly, ParamAccess::Written, ParamAccess::Written,
                                  ParamAccess::Scalar});
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[1].access, ParamAccess::Written);
  // The engine trusts a declaration within the kind, as it does for any
  // pointer (docs/api.md, "Parameter access").
  auto r = params(kCopy, "copy", {ParamAccess::ReadOnly, ParamAccess::ReadOnly, ParamAccess::Written,
                                  ParamAccess::Scalar});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[1].access, ParamAccess::ReadOnly);
  auto p = eng().compile_sync(0, kCopy);
  ASSERT_TRUE(p.ok());
  auto wrong = eng().kernel(p.value(), "copy", {ParamAccess::ReadOnly, ParamAccess::Scalar, ParamAccess::Written,
                                                 ParamAccess::Scalar});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status(), Status::IncorrectKernelArg);
}

TEST_F(SourceAccessEngine, WriteOnlyLaunchesGiveProgramOrderResults) {
  // A write, an inferred WriteOnly launch over it, then a read: the launch
  // still waits for the write before it (write after write).
  auto prog = eng().compile_sync(0, kCopy);
  ASSERT_TRUE(prog.ok());
  auto k = eng().kernel(prog.value(), "copy");
  ASSERT_TRUE(k.ok());
  const std::size_t n = 4096;
  Buffer in = upload(std::vector<float>(n, 3.0f));
  Buffer out = upload(std::vector<float>(n, -1.0f));
  Buffer both = upload(std::vector<float>(n, 1.0f));
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(eng().write(out, 0, uvcl::testing::bytes_of(std::vector<float>(n, -2.0f))).ok());
    ASSERT_TRUE(eng()
                    .launch(Launch{k.value(),
                                   {KernelArg::of(in), KernelArg::of(out), KernelArg::of(both),
                                    KernelArg::value<std::uint32_t>(n)},
                                   {n},
                                   {}})
                    .ok());
  }
  EXPECT_EQ(download<float>(out, n), std::vector<float>(n, 3.0f));
  EXPECT_EQ(download<float>(both, n), std::vector<float>(n, 4.0f));
}

}  // namespace uvcl::source_access_test
