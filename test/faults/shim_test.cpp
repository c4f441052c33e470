// The shim itself: it exports exactly the engine's entry points, forwards
// them, counts objects and parses fault specs.
#include <dlfcn.h>

#include <array>
#include <string>

#include "cl/api.hpp"
#include "harness.hpp"

namespace uvcl::faults::shim_test {
namespace {

TEST(Shim, ExportsEveryEntryPointOfTheTable) {
  ASSERT_TRUE(shim_ok());
  void* h = shim().handle;
  std::vector<std::string> missing;
#define UVCL_FAULTS_CHECK(name)                                                      \
  {                                                                                  \
    void* sym = ::dlsym(h, #name);                                                   \
    Dl_info info{};                                                                  \
    if (sym == nullptr || ::dladdr(sym, &info) == 0 || info.dli_fname == nullptr ||  \
        std::string(info.dli_fname).find("uvcl_clshim") == std::string::npos)        \
      missing.push_back(#name);                                                      \
  }
  UVCL_CL_ENTRY_POINTS(UVCL_FAULTS_CHECK)
#undef UVCL_FAULTS_CHECK
  EXPECT_TRUE(missing.empty()) << "not defined by the shim: " << ::testing::PrintToString(missing);
}

TEST(Shim, ForwardsAndCounts) {
  ASSERT_TRUE(shim_ok());
  const long before = shim().calls("clCreateContext");
  const LiveSnapshot live;
  {
    LoopEngine le;
    ASSERT_TRUE(le.create(shim_config()).ok());
    EXPECT_EQ(shim().calls("clCreateContext"), before + 1);
    EXPECT_EQ(live.delta("context"), 1);
    EXPECT_EQ(live.delta("queue"), 11) << "8 compute queues + profiling + transfer + staging map queue";
    EXPECT_EQ(le.destroy(), 0);
  }
  EXPECT_EQ(live.delta("all"), 0);
  EXPECT_EQ(shim().live("nonsense"), -1);
  EXPECT_EQ(shim().calls("clNotAFunction"), -1);
}

TEST(Shim, ParsesFaultSpecs) {
  ASSERT_TRUE(shim_ok());
  const ShimApi& s = shim();
  s.reset_faults();
  for (const char* good : {"clEnqueueNDRangeKernel:5:CL_OUT_OF_RESOURCES", "clCreateBuffer:1:CL_MEM_OBJECT_ALLOCATION_FAILURE",
                           "clBuildProgram:1:CL_BUILD_PROGRAM_FAILURE", "clFlush:2:CL_INVALID_EVENT_WAIT_LIST",
                           "clCreateContext:1:CL_OUT_OF_HOST_MEMORY", "clFinish:1:CL_DEVICE_NOT_AVAILABLE",
                           "clSetKernelArg:3:CL_INVALID_OPERATION", "clFlush:1:-5",
                           "event:clEnqueueNDRangeKernel:3:CL_OUT_OF_RESOURCES", "lost:clFlush:2",
                           "lost:clFlush:2:CL_OUT_OF_RESOURCES"}) {
    const int armed = s.armed();
    s.set_fault(good);
    EXPECT_EQ(s.armed(), armed + 1) << good;
  }
  for (const char* bad : {"", "clFlush", "clFlush:0:CL_OUT_OF_RESOURCES", "clFlush:x:CL_OUT_OF_RESOURCES",
                          "clNope:1:CL_OUT_OF_RESOURCES", "clFlush:1:CL_NOT_A_STATUS", "clFlush:1:CL_SUCCESS",
                          "event:clFlush:1", "lost:clFlush", "clFlush:1:CL_OUT_OF_RESOURCES:extra"}) {
    const int armed = s.armed();
    s.set_fault(bad);
    EXPECT_EQ(s.armed(), armed) << bad;
  }
  s.reset_faults();
  EXPECT_EQ(s.armed(), 0);
  EXPECT_EQ(s.lost(), 0);
}

// A fault fires on the N-th call from the moment it is set, once.
TEST(Shim, FaultFiresOnTheNthCallOnce) {
  ASSERT_TRUE(shim_ok());
  const LiveSnapshot live;
  LoopEngine le;
  ASSERT_TRUE(le.create(shim_config(1)).ok());
  Engine& e = *le.engine;
  shim().reset_faults();
  const int anomalies0 = shim().anomalies();
  shim().set_fault("clCreateBuffer:3:CL_MEM_OBJECT_ALLOCATION_FAILURE");
  EXPECT_TRUE(e.allocate(0, 64).ok());
  EXPECT_TRUE(e.allocate(0, 64).ok());
  auto third = e.allocate(0, 64);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status(), Status::MemoryAllocation);
  EXPECT_NE(third.error().message.find("clCreateBuffer"), std::string::npos) << third.error().to_string();
  EXPECT_NE(third.error().message.find("CL_MEM_OBJECT_ALLOCATION_FAILURE"), std::string::npos);
  EXPECT_TRUE(e.allocate(0, 64).ok());
  EXPECT_EQ(shim().fired(), 1);
  EXPECT_EQ(shim().armed(), 0);
  EXPECT_EQ(live.delta("mem"), 4);  // three buffers and the staging slab mapped at creation
  EXPECT_EQ(le.destroy(), 0);
  EXPECT_EQ(live.delta("all"), 0);
  EXPECT_EQ(shim().anomalies(), anomalies0) << shim().anomaly_log();
}

// The load-time path: run by the faults-env test entry with
// UVCL_SHIM_FAULT=clCreateContext:1:CL_OUT_OF_HOST_MEMORY (skipped otherwise).
TEST(ShimEnv, FaultFromTheEnvironment) {
  const char* env = std::getenv("UVCL_SHIM_FAULT");
  if (env == nullptr || std::string(env) != "clCreateContext:1:CL_OUT_OF_HOST_MEMORY")
    GTEST_SKIP() << "run with UVCL_SHIM_FAULT=clCreateContext:1:CL_OUT_OF_HOST_MEMORY";
  // The first engine loads the shim, which reads the variable at load time.
  LoopEngine le;
  auto r = le.create(shim_config());
  const LiveSnapshot live;  // the shim is loaded now; nothing of it should be live
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Status::Initialization);
  EXPECT_NE(r.error().message.find("clCreateContext"), std::string::npos) << r.error().to_string();
  EXPECT_NE(r.error().message.find("CL_OUT_OF_HOST_MEMORY"), std::string::npos) << r.error().to_string();
  EXPECT_EQ(le.destroy(), 0);
  ASSERT_TRUE(shim_ok());
  EXPECT_EQ(shim().fired(), 1);
  EXPECT_EQ(live.delta("all"), 0);
  // One-shot: the next engine works.
  LoopEngine again;
  ASSERT_TRUE(again.create(shim_config()).ok());
  EXPECT_TRUE(fresh_job(*again.engine, std::nullopt, 20).empty());
  EXPECT_EQ(again.destroy(), 0);
  EXPECT_EQ(live.delta("all"), 0);
}

}  // namespace
}  // namespace uvcl::faults::shim_test
