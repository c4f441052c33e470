// Library: dlopen of the real ICD loader, the search order, and the errors
// for a missing library and a missing entry point.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../watchdog.hpp"
#include "cl/api.hpp"

namespace cl_library_test {

using uvcl::Status;
using uvcl::cl::Api;
using uvcl::cl::Library;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(ClLibrary, OpensTheSystemLoaderWithEveryEntryPoint) {
  auto lib = Library::open("");
  ASSERT_TRUE(lib.ok()) << lib.error().to_string();
  const Api& api = (*lib)->api();
  EXPECT_FALSE(api.library_path.empty());
  EXPECT_NE(api.handle, nullptr);
#define UVCL_CHECK_MEMBER(name) EXPECT_NE(api.name, nullptr) << #name;
  UVCL_CL_ENTRY_POINTS(UVCL_CHECK_MEMBER)
#undef UVCL_CHECK_MEMBER
  cl_uint platforms = 0;
  EXPECT_EQ(api.clGetPlatformIDs(0, nullptr, &platforms), CL_SUCCESS);
  EXPECT_GE(platforms, 1u);
}

TEST(ClLibrary, ReopeningAfterCloseWorks) {
  // The engine may be created and destroyed several times in one process.
  for (int round = 0; round < 3; ++round) {
    auto lib = Library::open("");
    ASSERT_TRUE(lib.ok()) << lib.error().to_string();
    cl_uint platforms = 0;
    EXPECT_EQ((*lib)->api().clGetPlatformIDs(0, nullptr, &platforms), CL_SUCCESS) << "round " << round;
    EXPECT_GE(platforms, 1u) << "round " << round;
  }
}

TEST(ClLibrary, CandidateOrder) {
  const std::vector<std::string> plain = Library::candidate_paths("");
  ASSERT_GE(plain.size(), 14u);
  EXPECT_EQ(plain[0], "libOpenCL.so.1");
  EXPECT_EQ(plain[1], "libOpenCL.so");
  EXPECT_EQ(plain[2], "/usr/lib/x86_64-linux-gnu/libOpenCL.so.1");
  EXPECT_EQ(plain[3], "/usr/lib/x86_64-linux-gnu/libOpenCL.so");
  for (const char* folder : {"/usr/lib64/", "/usr/lib/", "/usr/local/lib/", "/opt/rocm/lib/", "/usr/local/cuda/lib64/"}) {
    for (const char* name : {"libOpenCL.so.1", "libOpenCL.so"}) {
      const std::string path = std::string(folder) + name;
      EXPECT_NE(std::find(plain.begin(), plain.end(), path), plain.end()) << path;
    }
  }

  // A library the user names is the only one tried.
  const std::vector<std::string> with = Library::candidate_paths("/opt/vendor/libOpenCL.so.1");
  EXPECT_EQ(with, std::vector<std::string>{"/opt/vendor/libOpenCL.so.1"});
}

TEST(ClLibrary, MissingLibraryIsDyLibNotFoundNamingEveryPath) {
  const std::vector<std::string> paths = {"/nonexistent/uvcl-test/libOpenCL.so.1", "libuvcl-test-no-such-lib.so"};
  auto lib = Library::open_first(paths);
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status(), Status::DyLibNotFound);
  const std::string& message = lib.error().message;
  for (const std::string& path : paths) EXPECT_TRUE(contains(message, path)) << message;
  // dlerror of the first path says why it failed.
  EXPECT_TRUE(contains(message, "No such file")) << message;
}

TEST(ClLibrary, NoPathsAtAllIsDyLibNotFound) {
  auto lib = Library::open_first({});
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status(), Status::DyLibNotFound);
}

// A library named in the config that is missing, not a library, or not a
// regular file is an error naming it: it used to fall back, silently, to the
// system loader.
TEST(ClLibrary, ExplicitPathThatDoesNotLoadIsAnError) {
  uvcl::testing::Watchdog wd("opencl.library errors", 30);  // a FIFO blocked dlopen
  auto lib = Library::open("/nonexistent/uvcl-test/libOpenCL.so.1");
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status(), Status::DyLibNotFound);
  EXPECT_TRUE(contains(lib.error().message, "/nonexistent/uvcl-test/libOpenCL.so.1")) << lib.error().message;

  const std::string text = ::testing::TempDir() + "uvcl-not-a-library.so";
  std::FILE* f = std::fopen(text.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("not an ELF file\n", f);
  std::fclose(f);
  lib = Library::open(text);
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status(), Status::DyLibNotFound);
  EXPECT_TRUE(contains(lib.error().message, text)) << lib.error().message;
  std::remove(text.c_str());

  const std::string fifo = ::testing::TempDir() + "uvcl-library-fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  lib = Library::open(fifo);  // dlopen would block in open(): refused before
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status(), Status::DyLibNotFound);
  EXPECT_TRUE(contains(lib.error().message, "a FIFO")) << lib.error().message;
  std::remove(fifo.c_str());

  lib = Library::open("libm.so.6");  // loads, but is no OpenCL
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status(), Status::MissingSymbol);
}

TEST(ClLibrary, ALibraryThatIsNotOpenClIsMissingSymbol) {
  // libm opens fine but has no OpenCL entry point: the first one is named.
  auto lib = Library::open_first({"libm.so.6"});
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status(), Status::MissingSymbol);
  EXPECT_EQ(lib.error().message, "OpenCL library libm.so.6 lacks clGetPlatformIDs");
}

// A fake symbol table: every name resolves to a dummy address except those
// listed in `missing`.
struct FakeSymbols {
  std::vector<std::string> missing;
  std::vector<std::string> asked;
};

void dummy_entry_point() {}

void* fake_lookup(void* ctx, const char* name) {
  auto* symbols = static_cast<FakeSymbols*>(ctx);
  symbols->asked.emplace_back(name);
  for (const std::string& m : symbols->missing) {
    if (m == name) return nullptr;
  }
  void (*fn)() = &dummy_entry_point;
  void* p = nullptr;
  std::memcpy(&p, &fn, sizeof p);
  return p;
}

TEST(ClLibrary, ResolveNamesTheMissingSymbol) {
  FakeSymbols symbols{{"clSetKernelArg"}, {}};
  auto api = Library::resolve(fake_lookup, &symbols, "/fake/libOpenCL.so.1");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status(), Status::MissingSymbol);
  EXPECT_EQ(api.error().message, "OpenCL library /fake/libOpenCL.so.1 lacks clSetKernelArg");
}

TEST(ClLibrary, ResolveReportsTheFirstMissingSymbol) {
  // Listed out of table order on purpose: the table order decides.
  FakeSymbols symbols{{"clSetUserEventStatus", "clCreateBuffer"}, {}};
  auto api = Library::resolve(fake_lookup, &symbols, "x.so");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.error().message, "OpenCL library x.so lacks clCreateBuffer");
}

TEST(ClLibrary, ResolveFillsEveryMember) {
  FakeSymbols symbols;
  auto api = Library::resolve(fake_lookup, &symbols, "fake.so");
  ASSERT_TRUE(api.ok()) << api.error().to_string();
  EXPECT_EQ(api->library_path, "fake.so");
  EXPECT_EQ(api->handle, nullptr);  // resolve() does not own a library
  std::vector<std::string> expected;
#define UVCL_EXPECT_MEMBER(name)          \
  EXPECT_NE(api->name, nullptr) << #name; \
  expected.emplace_back(#name);
  UVCL_CL_ENTRY_POINTS(UVCL_EXPECT_MEMBER)
#undef UVCL_EXPECT_MEMBER
  EXPECT_EQ(symbols.asked, expected);
}

}  // namespace cl_library_test
