// The kernels of `uvcl serve --kernels examples/kernels` (docs/serve.md):
// jobs name them blas:ENTRY, e.g. examples/serve_jobs/saxpy-library.json.
kernel void saxpy(const float a, global const float* x, global float* y) {
  size_t i = get_global_id(0);
  y[i] = a * x[i] + y[i];
}
