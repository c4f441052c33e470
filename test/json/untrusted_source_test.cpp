// What a kernel source or build options from the network may not hold, and
// build logs without server paths (program/untrusted_source.hpp).
#include <gtest/gtest.h>

#include <string>

#include "program/job.hpp"
#include "program/untrusted_source.hpp"

namespace untrusted_source_test {

using uvcl::job::refuse_untrusted_options;
using uvcl::job::refuse_untrusted_source;
using uvcl::job::scrub_paths;

TEST(UntrustedSource, DirectivesAreRefusedHoweverSpelled) {
  for (const char* src : {"#include \"/etc/passwd\"\n", "  #  include <x.h>\n", "%:include \"/etc/passwd\"\n",
                          "#inc\\\nlude \"/etc/passwd\"\n", "#inc\\\r\nlude \"x\"\n", "#import \"x\"\n",
                          "#include_next <x>\n", "#pragma clang __debug crash\n", "_Pragma(\"x\")\n",
                          "#if __has_include(\"/etc/shadow\")\n#endif\n", "?\?=include \"x\"\n"}) {
    EXPECT_TRUE(refuse_untrusted_source(src).has_value()) << src;
  }
  auto why = refuse_untrusted_source("kernel void k() {}\n\n#include \"/etc/passwd\"\n");
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(why->rfind("line 3: \"include\": ", 0), 0u) << *why;
}

TEST(UntrustedSource, PrintfIsRefused) {
  for (const char* src : {"printf(\"x\");", "__builtin_printf(\"x\");", "#undef printf\n", "#define P printf\n"})
    EXPECT_TRUE(refuse_untrusted_source(src).has_value()) << src;
  auto why = refuse_untrusted_source("kernel void k() { printf(\"%d\", 1); }");
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("stdout"), std::string::npos) << *why;
}

TEST(UntrustedSource, OrdinaryKernelsPass) {
  EXPECT_FALSE(refuse_untrusted_source(
                   "#define TILE 64\n#if TILE > 32\n#endif\n"
                   "kernel void k(global const float* a, global float* b) {\n"
                   "  // a / b: no path here\n  b[get_global_id(0)] = a[get_global_id(0)] / 2.0f;\n}\n")
                   .has_value());
}

TEST(UntrustedSource, OptionsComeFromAnAllowList) {
  for (const char* ok : {"", "-DTILE=64", "-D TILE=64 -U X", "-cl-mad-enable -cl-std=CL1.2", "-w -Werror"})
    EXPECT_FALSE(refuse_untrusted_options(ok).has_value()) << ok;
  for (const char* bad : {"-I/etc", "-I /etc", "-include /etc/passwd", "-imacros x", "-Xclang -load", "-isystem /",
                          "x", "-DX=1\n#include \"y\"", "-Dprintf=puts", "-DX=__has_include(\"/etc/passwd\")"})
    EXPECT_TRUE(refuse_untrusted_options(bad).has_value()) << bad;
  auto why = refuse_untrusted_options("-DA=1 -I/etc");
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "\"-I/etc\" is not allowed (allowed: -D, -U, -w, -Werror, -cl-*)");
}

TEST(UntrustedSource, ParseJobRefusesWhenAsked) {
  const std::string doc =
      R"({"buffers": {}, "kernels": {"k": {"source": "#include \"/etc/passwd\"\n"}}, "launches": []})";
  EXPECT_TRUE(uvcl::job::parse_job(doc, "job.json").ok()) << "a local job may include";
  uvcl::job::ParseOptions untrusted;
  untrusted.untrusted_kernels = true;
  auto r = uvcl::job::parse_job(doc, "request", untrusted);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("request: kernels.k.source: line 1: \"include\": ", 0), 0u) << r.error().message;
}

TEST(ScrubPaths, AbsolutePathsAreReplaced) {
  EXPECT_EQ(scrub_paths("error: /home/u/.cache/pocl/kcache/tempfile_ab.cl:2:10: use of undeclared identifier"),
            "error: <source>:2:10: use of undeclared identifier");
  EXPECT_EQ(scrub_paths("'/nonexist/x.h' file not found"), "'<path>' file not found");
  EXPECT_EQ(scrub_paths("  y[0] = a / b;  x = 1 /2;"), "  y[0] = a / b;  x = 1 /2;");
}

}  // namespace untrusted_source_test
