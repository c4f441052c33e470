// Parameter use from kernel source (cl/source_access.hpp): which __global
// pointers a kernel only stores through, and which it stores element
// get_global_id(0) of in every work-item. No OpenCL: text only. Every case
// the rules do not prove stays false.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cl/source_access.hpp"

namespace cl_source_access_test {

using uvcl::cl::kernel_uses;
using uvcl::cl::param_uses;
using uvcl::cl::ParamUse;

std::vector<bool> never_read(const std::string& src, const std::string& kernel = "k",
                             const std::string& options = "") {
  std::vector<bool> out;
  for (const ParamUse& p : param_uses(src, kernel, options)) out.push_back(p.never_read);
  return out;
}

std::vector<bool> each(const std::string& src, const std::string& kernel = "k") {
  std::vector<bool> out;
  for (const ParamUse& p : param_uses(src, kernel)) out.push_back(p.writes_each_global_id);
  return out;
}

using B = std::vector<bool>;

// The body of `kernel void k(global float* out, global const float* in, uint n)`.
std::string body(const std::string& code) {
  return "kernel void k(global float* out, global const float* in, uint n) {\n" + code + "\n}\n";
}

TEST(SourceAccess, StoreThroughAnIndexVariable) {
  const std::string src = body("  size_t i = get_global_id(0);\n  out[i] = in[i] * 2.0f + n;");
  auto uses = param_uses(src, "k");
  ASSERT_EQ(uses.size(), 3u);
  EXPECT_EQ(uses[0].name, "out");
  EXPECT_EQ(uses[1].name, "in");
  EXPECT_EQ(uses[2].name, "n");
  EXPECT_EQ(never_read(src), (B{true, false, false}));
  EXPECT_EQ(each(src), (B{true, false, false}));
}

TEST(SourceAccess, StoreAtGetGlobalIdWrittenOut) {
  EXPECT_EQ(each(body("out[get_global_id(0)] = in[get_global_id(0)];")), (B{true, false, false}));
  EXPECT_EQ(each(body("out[ get_global_id ( 0u ) ] = 1.0f;")), (B{true, false, false}));
}

TEST(SourceAccess, IndexVariableTypes) {
  for (const char* type : {"size_t", "const size_t", "int", "uint", "unsigned int", "unsigned", "long", "ulong",
                           "const int"}) {
    const std::string src = body(std::string("  ") + type + " g = get_global_id(0);\n  out[g] = 0.0f;");
    EXPECT_EQ(each(src), (B{true, false, false})) << type;
  }
  // Too narrow for any global size, or not an integer the rule knows.
  for (const char* type : {"short", "uchar", "float"}) {
    const std::string src = body(std::string("  ") + type + " g = get_global_id(0);\n  out[g] = 0.0f;");
    EXPECT_EQ(never_read(src), (B{true, false, false})) << type;
    EXPECT_EQ(each(src), (B{false, false, false})) << type;
  }
}

TEST(SourceAccess, UnconditionalAfterEarlierBlocks) {
  const std::string src = body(
      "  size_t i = get_global_id(0);\n"
      "  float v = 0.0f;\n"
      "  for (uint r = 0; r < n; ++r) { v += in[r]; }\n"
      "  if (v > 1.0f) { v = 1.0f; } else { v = 0.0f; }\n"
      "  out[i] = v;");
  EXPECT_EQ(each(src), (B{true, false, false}));
}

TEST(SourceAccess, ReadsAreNotNeverRead) {
  for (const char* code : {
           "vstore4((float4)(0.0f), get_global_id(0), out);",
           "*out = 1.0f;",
           "*(out + get_global_id(0)) = 1.0f;",
           "global float* p = out + 1; p[0] = 2.0f;",
           "global float* p = &out[1]; *p = 2.0f;",
           "out[get_global_id(0)] += 1.0f;",
           "out[get_global_id(0)] *= 2.0f;",
           "out[get_global_id(0)]++;",
           "++out[get_global_id(0)];",
           "if (out[0] == 0.0f) out[1] = 1.0f;",
           "out[0] = 1.0f; float x = out[0];",
           "out[(uint)out[0]] = 1.0f;",
           "float v = out[1] <= 2.0f; out[0] = v;",
           "out[0] = 1.0f, in = out;",
       }) {
    EXPECT_EQ(never_read(body(code)), (B{false, false, false})) << code;
  }
}

TEST(SourceAccess, ANameThatDoesNotOccurIsUnknown) {
  EXPECT_EQ(never_read(body("float x = in[0] + n;")), (B{false, false, false}));
}

TEST(SourceAccess, CommentsAndLiteralsAreNotCode) {
  const std::string src = body(
      "  // float x = out[0];\n"
      "  /* out[1] + 2; vstore4(v, 0, out); */\n"
      "  printf(\"out[%d] + %c\\n\", 1, 'o');\n"
      "  size_t i = get_global_id(0); // out += 1\n"
      "  out[i] = in[i]; /* ++out */");
  EXPECT_EQ(never_read(src), (B{true, false, false}));
  EXPECT_EQ(each(src), (B{true, false, false}));
}

TEST(SourceAccess, PreprocessorDirectivesStopTheAnalysis) {
  const std::string kernel = body("size_t i = get_global_id(0);\nout[i] = in[i];");
  EXPECT_EQ(never_read(kernel), (B{true, false, false}));
  for (const char* directive : {"#define N 4\n", "#include \"x.h\"\n", "#if 1\n#endif\n", "  #  define X out[0]\n",
                                "#\n", "#undef X\n"}) {
    EXPECT_TRUE(param_uses(directive + kernel, "k").empty()) << directive;
    EXPECT_TRUE(kernel_uses(directive + kernel).empty()) << directive;
  }
  // A # that is no directive is no source this analysis reads either.
  EXPECT_TRUE(param_uses(body("float x = 1; # out[0];"), "k").empty());
  // #pragma is fine, also inside a body.
  const std::string pragma = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" +
                             body("#pragma unroll\nsize_t i = get_global_id(0);\nout[i] = in[i];");
  EXPECT_EQ(never_read(pragma), (B{true, false, false}));
  EXPECT_EQ(each(pragma), (B{true, false, false}));
}

TEST(SourceAccess, MacrosFromBuildOptions) {
  const std::string src = body("out[get_global_id(0)] = SCALE * in[get_global_id(0)];");
  EXPECT_TRUE(param_uses(src, "k", "-DSCALE=2").empty());
  EXPECT_TRUE(param_uses(src, "k", "-cl-fast-relaxed-math -D SCALE=2").empty());
  EXPECT_TRUE(param_uses(src, "k", "-D'SCALE=2'").empty());
  EXPECT_TRUE(param_uses(src, "k", "-include defs.h").empty());
  // A macro the source never names changes nothing.
  EXPECT_EQ(never_read(src, "k", "-DUNUSED=1 -cl-mad-enable -cl-kernel-arg-info"), (B{true, false, false}));
}

TEST(SourceAccess, LineSplicesJoinIdentifiers) {
  EXPECT_EQ(never_read(body("out[0] = 1.0f; float x = o\\\nut[0];")), (B{false, false, false}));
  EXPECT_EQ(never_read(body("out[0] = 1.0f; float x = o\\  \nut[0];")), (B{false, false, false}));
}

TEST(SourceAccess, SeveralKernelsAndHelpers) {
  // Kernels like examples/showcase/fanout.json's, and a helper function.
  const std::string src =
      "kernel void scale(global const float* in, global float* out, const float k) {\n"
      "  size_t i = get_global_id(0);\n  float v = in[i];\n"
      "  for (int r = 0; r < 64; ++r) v = v * k + 0.5f;\n  out[i] = v;\n}\n"
      "float helper(global float* out) { return out[0]; }\n"
      "kernel void add4(global const float* a, global const float* b, global const float* c,\n"
      "                 global const float* d, global float* out) {\n"
      "  size_t i = get_global_id(0);\n  out[i] = a[i] + b[i] + c[i] + d[i];\n}\n"
      "kernel void reads(global float* out) { out[0] = helper(out); }\n";
  auto all = kernel_uses(src);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].name, "scale");
  EXPECT_EQ(all[1].name, "add4");
  EXPECT_EQ(all[2].name, "reads");
  EXPECT_EQ(never_read(src, "scale"), (B{false, true, false}));
  EXPECT_EQ(each(src, "scale"), (B{false, true, false}));
  EXPECT_EQ(never_read(src, "add4"), (B{false, false, false, false, true}));
  EXPECT_EQ(each(src, "add4"), (B{false, false, false, false, true}));
  EXPECT_EQ(never_read(src, "reads"), (B{false}));
  EXPECT_TRUE(param_uses(src, "helper").empty());  // not a kernel
  EXPECT_TRUE(param_uses(src, "missing").empty());
}

TEST(SourceAccess, AttributesAndDeclarations) {
  const std::string src =
      "kernel void k(global float* out);\n"
      "__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void k(__global float* restrict out) {\n"
      "  out[get_global_id(0)] = 1.0f;\n}\n"
      "kernel void __attribute__((vec_type_hint(float4))) j(global float* out, global int* flags) {\n"
      "  flags[0] = 1;\n  out[get_global_id(0)] = 2.0f;\n}\n"
      "kernel void none(void) { }\n";
  EXPECT_EQ(never_read(src, "k"), (B{true}));
  EXPECT_EQ(each(src, "k"), (B{true}));
  EXPECT_EQ(never_read(src, "j"), (B{true, true}));
  EXPECT_EQ(each(src, "j"), (B{true, false}));
  auto all = kernel_uses(src);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(all[2].params.empty());
}

TEST(SourceAccess, UnreadableSourcesGiveNothing) {
  for (const char* src : {
           "kernel void k(global float* out) { out[0] = 1.0f; /* open",
           "kernel void k(global float* out) { out[0] = 1.0f; ",
           "kernel void k(global float* out) { out[0] = 1.0f; ) }",
           "kernel void k(global float* out) { out<:0:> = 1.0f; }",
           "kernel void k(global float* out) { out[0] = 1.0f; } ?\?=define X",
           "kernel void k(global float* out) { char* s = \"open; out[0] = 1.0f; }",
           "kernel void k(global float* out) { out[0] = 1.0f; $ }",
           "kernel void k(global float* out) { out[0] = 1.0f; \\ }",
       }) {
    EXPECT_TRUE(kernel_uses(src).empty()) << src;
  }
  // Two definitions of one name (no preprocessor could make both exist).
  EXPECT_TRUE(param_uses("kernel void k(global float* o) { o[0] = 1; }\n"
                         "kernel void k(global float* o) { o[0] = 2; }",
                         "k")
                  .empty());
  // An unnamed parameter: not understood.
  EXPECT_TRUE(param_uses("kernel void k(global float*) { }", "k").empty());
}

TEST(SourceAccess, ConditionalOrPartialStoresAreNotEachItem) {
  for (const char* code : {
           "size_t i = get_global_id(0);\nif (i < n) out[i] = in[i];",
           "size_t i = get_global_id(0);\nif (i < n) { out[i] = in[i]; }",
           "size_t i = get_global_id(0);\nif (i >= n) return;\nout[i] = in[i];",
           "size_t i = get_global_id(0);\nif (n) in = in + 1; else out[i] = 1.0f;",
           "size_t i = get_global_id(0);\nfor (uint r = 0; r < n; ++r) out[i] = r;",
           "size_t i = get_global_id(0);\nwhile (n--) out[i] = 1.0f;",
           "{ size_t i = get_global_id(0);\nout[i] = in[i]; }",
           "size_t i = get_global_id(0);\nout[i / 2] = in[i];",
           "size_t i = get_global_id(0);\nout[2 * i] = in[i];",
           "out[get_global_id(1)] = 1.0f;",
           "out[get_local_id(0)] = 1.0f;",
           "size_t i = get_global_id(0);\ni += 1;\nout[i] = 1.0f;",
           "size_t i = get_global_id(0);\ni++;\nout[i] = 1.0f;",
           "size_t i = get_global_id(0);\nout[i] = 1.0f;\n--i;",
           "size_t i = get_global_id(0);\nsize_t* p = &i;\nout[i] = 1.0f;",
           "size_t i = get_global_id(0);\nsize_t i2 = i;\nout[i2] = 1.0f;",
           "size_t i = get_global_id(1);\nout[i] = 1.0f;",
           "size_t i = get_global_id(0);\ngoto end;\nout[i] = 1.0f;\nend: ;",
           "switch (n) { case 0: out[get_global_id(0)] = 1.0f; }",
       }) {
    const std::string src = body(code);
    EXPECT_EQ(never_read(src), (B{true, false, false})) << code;
    EXPECT_EQ(each(src), (B{false, false, false})) << code;
  }
}

TEST(SourceAccess, OwnGetGlobalIdIsNotOpenCls) {
  const std::string src = "size_t get_global_id(uint d);\n" + body("out[get_global_id(0)] = 1.0f;");
  EXPECT_EQ(never_read(src), (B{true, false, false}));
  EXPECT_EQ(each(src), (B{false, false, false}));
}

TEST(SourceAccess, TinygradStyleKernels) {
  // Indices from group and local ids: only stored to, but not element g of
  // each work-item by the rule.
  const std::string src =
      "__kernel void E_4_4(__global float* data0, __global float* data1, __global float* data2) {\n"
      "  int gidx0 = get_group_id(0); /* 4 */\n"
      "  int lidx0 = get_local_id(0); /* 4 */\n"
      "  int alu0 = (lidx0+(gidx0<<2));\n"
      "  float val0 = data1[alu0];\n"
      "  float val1 = data2[alu0];\n"
      "  data0[alu0] = (val0+val1);\n"
      "}\n";
  EXPECT_EQ(never_read(src, "E_4_4"), (B{true, false, false}));
  EXPECT_EQ(each(src, "E_4_4"), (B{false, false, false}));
  // bench/jobs/tinygrad-convnet.json: tinygrad stores through pointer
  // arithmetic, which the rule does not read as a store.
  const std::string real =
      "__kernel void r_48_3_32_4_2_2(__global float* data0_18432, __global float* data1_73728) {\n"
      "  int gidx0 = get_group_id(0); /* 3 */\n"
      "  int gidx1 = get_group_id(1); /* 48 */\n"
      "  int lidx0 = get_local_id(0); /* 32 */\n"
      "  int lidx1 = get_local_id(1); /* 4 */\n"
      "  int alu0 = ((gidx0<<3)+(lidx1<<1)+(gidx1*1536)+(lidx0*48));\n"
      "  float2 val0 = (*((__global float2*)((data1_73728+(alu0+24)))));\n"
      "  float2 val1 = (*((__global float2*)((data1_73728+alu0))));\n"
      "  float alu1 = ((val1.x<val1.y)?val1.y:val1.x);\n"
      "  float alu2 = ((alu1<val0.x)?val0.x:alu1);\n"
      "  float alu3 = ((alu2<val0.y)?val0.y:alu2);\n"
      "  *(data0_18432+(lidx1+(gidx0<<2)+(gidx1*384)+(lidx0*12))) = alu3;\n"
      "}\n";
  auto uses = param_uses(real, "r_48_3_32_4_2_2");
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[0].name, "data0_18432");
  EXPECT_FALSE(uses[0].never_read);
  EXPECT_FALSE(uses[1].never_read);
}

}  // namespace cl_source_access_test
