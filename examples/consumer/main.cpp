// The README's example, compiled and run by a project that uses uvcl as a
// Meson subproject (test/examples/consumer_test.py builds and runs it and
// checks that the block between the markers below is the README's example).
//
// Exit 0: the example ran and x[i] == 2 for every element; 1 otherwise (with
// the error's message on stderr where OpenCL or a device is missing).
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include <uvcl/engine.hpp>

namespace {

// The README's example, verbatim (its #include is at the top of this file),
// then the check. 0: the example ran and x[i] == 2 for every element.
int readme_example() {
  // --- README example begins ---
auto created = uvcl::Engine::create(uvcl::Config{});  // its own loop
if (!created) {  // e.g. DyLibNotFound on a machine without OpenCL
  std::fprintf(stderr, "uvcl: %s\n", created.error().to_string().c_str());
  return 1;
}
std::unique_ptr<uvcl::Engine> engine = std::move(created.value());
auto prog = engine->compile_sync(0, R"(
  __kernel void scale(__global float* x, float a) { x[get_global_id(0)] *= a; })");
if (!prog) {  // no device 0, or a build error: the message carries the build log
  std::fprintf(stderr, "uvcl: %s\n", prog.error().to_string().c_str());
  return 1;
}
auto scale = engine->kernel(prog.value(), "scale").value();
std::vector<float> host(1024, 1.0f);
auto buf = engine->allocate(0, host.size() * sizeof(float)).value();
(void)engine->write(buf, 0, std::as_bytes(std::span(host)));
(void)engine->launch({scale, {uvcl::KernelArg::of(buf), uvcl::KernelArg::value(2.0f)}, {1024}});
(void)engine->read(buf, 0, 1024 * sizeof(float), [](auto data) {
  // On the loop thread, once the launch's result is there.
  if (data) std::printf("x[0] = %g\n", reinterpret_cast<const float*>(data->data())[0]);
});
(void)engine->finish();  // runs the loop until everything above is done
  // --- README example ends ---

  // The check: every element was scaled once.
  auto all = engine->read_sync(buf, 0, host.size() * sizeof(float));
  if (!all) {
    std::fprintf(stderr, "consumer: read_sync: %s\n", all.error().to_string().c_str());
    return 1;
  }
  const float* x = reinterpret_cast<const float*>(all->data());
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (x[i] != 2.0f) {
      std::fprintf(stderr, "consumer: x[%zu] = %g, expected 2\n", i, static_cast<double>(x[i]));
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main() {
  if (readme_example() != 0) return 1;
  std::printf("consumer: ok (uvcl as a Meson subproject)\n");
  return 0;
}
