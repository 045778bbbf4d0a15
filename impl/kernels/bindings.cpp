// Torch-facing wrappers of the launchers in launchers.h: validate, allocate, launch on
// torch's current stream, check the launch. The only file of impl/kernels that includes
// torch; it is compiled by torch.utils.cpp_extension on the GPU machine (impl/kernels/
// __init__.py). Errors name the operation, the bad value and what is allowed; TypeError
// for a wrong dtype, ValueError for a wrong device, layout or shape, RuntimeError for a
// failed launch.
//
// impl/kernels/ops.py makes the same checks, with the same messages and in the same
// order, before it calls in here; these are the second line of defence for direct calls.
// They raise Python exceptions themselves (PyErr_SetString, then py::error_already_set)
// instead of throwing c10 exceptions: on the GPU machine (torch 2.11, extension built by
// another g++ than torch's) a failed TORCH_CHECK_TYPE here killed the interpreter with a
// segmentation fault instead of raising TypeError. c10 builds that message in an
// std::ostringstream, with the source line number in it: the same kind of crash as the
// one described at text() below, whose cause was narrowed to integers formatted by an
// std::ostream inside this extension.
// pybind11's dispatcher catches error_already_set by type and restores the error it
// carries; every other exception (c10's, and also pybind11's own py::type_error and
// py::value_error) is rethrown through the exception translators in pybind11's internals,
// which torch's extension machinery shares. So this path needs neither c10's exception
// types nor anyone's translator.
//
// Only c10/cuda headers (not ATen/cuda/CUDAContext.h): they need cuda_runtime_api.h
// alone, not the cuBLAS/cuSPARSE headers a bare CUDA toolkit may lack.
// c10::cuda::getCurrentCUDAStream() is the stream at::cuda::getCurrentCUDAStream() returns.
#include <torch/extension.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <climits>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "launchers.h"

namespace {

// Kernels index with 32-bit sizes (launchers.h): every dimension at most 2^30, every
// matrix at most INT_MAX elements.
constexpr int64_t kMaxDim = int64_t{1} << 30;

// Every part of a message becomes a std::string here, integers through std::to_string:
// no number goes through an std::ostream. On the GPU machine (torch 2.11, extension built
// with the system g++), every message with an integer inserted into an std::ostringstream
// (a shape, by c10's operator<< or by hand) killed the interpreter with a segmentation
// fault, while messages of strings alone, and integers through std::to_string, raised
// correctly (bisected case by case, results/h200x1/logs/). The likely cause is a mismatch
// between the libstdc++ the extension was compiled against and the one loaded at run time
// in the locale facets that format numbers; it was not traced further.
std::string text(const char* value) { return value; }
std::string text(const std::string& value) { return value; }

template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
std::string text(T value) {
  return std::to_string(value);
}

// As Python prints a shape: [6, 4].
std::string text(at::IntArrayRef values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

// As Python prints a device: cpu, meta, cuda:1.
std::string text(const at::Device& device) {
  std::string name;
  switch (device.type()) {
    case at::kCPU: name = "cpu"; break;
    case at::kCUDA: name = "cuda"; break;
    case at::kMeta: name = "meta"; break;
    default: name = "device type " + std::to_string(static_cast<int>(device.type()));
  }
  if (device.has_index()) name += ":" + std::to_string(device.index());
  return name;
}

// Raises the Python exception `type` with the parts streamed into one message, through
// py::error_already_set (see the header comment). The bound functions run with the GIL
// held, as PyErr_SetString and error_already_set need.
template <typename... Parts>
[[noreturn]] void raise_error(PyObject* type, const Parts&... parts) {
  std::string message;
  ((message += text(parts)), ...);
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

// As Python prints them (str(torch.float32)), so the messages match ops.py's.
std::string dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kHalf: return "torch.float16";
    case at::kByte: return "torch.uint8";
    case at::kChar: return "torch.int8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kBool: return "torch.bool";
    case at::kComplexFloat: return "torch.complex64";
    case at::kComplexDouble: return "torch.complex128";
    default: return std::string("torch.") + c10::toString(dtype);
  }
}

// As Python prints them (str(torch.sparse_coo)), for the layout error.
std::string layout_name(at::Layout layout) {
  switch (layout) {
    case at::kStrided: return "torch.strided";
    case at::kSparse: return "torch.sparse_coo";
    case at::kSparseCsr: return "torch.sparse_csr";
    case at::kSparseCsc: return "torch.sparse_csc";
    case at::kSparseBsr: return "torch.sparse_bsr";
    case at::kSparseBsc: return "torch.sparse_bsc";
    case at::kMkldnn: return "torch._mkldnn";
    case at::kJagged: return "torch.jagged";
    default: return "layout " + std::to_string(static_cast<int>(layout));
  }
}

std::string dtype_list(std::initializer_list<at::ScalarType> dtypes) {
  std::string out;
  for (at::ScalarType dtype : dtypes) out += (out.empty() ? "" : ", ") + dtype_name(dtype);
  return out;
}

// A dense row-major matrix (matrix == false: a dense tensor of any shape). Everything but
// the device, which check_devices checks once the operands agree (ops._validate's order).
// `row_strided`: a matrix whose rows may lie further apart than its width (a view of wider
// rows, as ops.py's copies for v7 are), each row dense.
void check_operand(const char* op, const char* name, const at::Tensor& t,
                   std::initializer_list<at::ScalarType> dtypes, bool matrix = true,
                   bool row_strided = false) {
  bool dtype_ok = false;
  for (at::ScalarType dtype : dtypes) dtype_ok = dtype_ok || t.scalar_type() == dtype;
  if (!dtype_ok) {
    raise_error(PyExc_TypeError, op, ": ", name, " has dtype ", dtype_name(t.scalar_type()),
                "; allowed: ", dtype_list(dtypes));
  }
  if (t.layout() != at::kStrided) {
    raise_error(PyExc_ValueError, op, ": ", name, " must be a dense (strided) tensor; got layout ",
                layout_name(t.layout()));
  }
  if (matrix && t.dim() != 2) {
    raise_error(PyExc_ValueError, op, ": ", name, " must be 2-D (a matrix); got shape ", t.sizes());
  }
  const bool rows_dense = row_strided && t.dim() == 2 && t.stride(1) == 1 &&
                          t.stride(0) >= t.size(1);
  if (!t.is_contiguous() && !rows_dense) {
    raise_error(PyExc_ValueError, op, ": ", name, " must be contiguous (row-major",
                row_strided ? ", or rows of dense elements further apart" : "",
                "); got shape ", t.sizes(), " with strides ", t.strides(),
                "; call .contiguous() first");
  }
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > kMaxDim) {
      raise_error(PyExc_ValueError, op, ": ", name, " has shape ", t.sizes(),
                  "; every dimension must be at most 2^30");
    }
  }
  if (t.numel() > INT_MAX) {
    raise_error(PyExc_ValueError, op, ": ", name, " has ", t.numel(), " elements; at most ",
                INT_MAX, " are supported");
  }
}

// Both operands on one CUDA device: the last check before the launch.
void check_devices(const char* op, const char* name1, const at::Tensor& t1, const char* name2,
                   const at::Tensor& t2) {
  if (!t1.is_cuda()) {
    raise_error(PyExc_ValueError, op, ": ", name1, " must be a CUDA tensor; got device ",
                t1.device());
  }
  if (!t2.is_cuda()) {
    raise_error(PyExc_ValueError, op, ": ", name2, " must be a CUDA tensor; got device ",
                t2.device());
  }
  if (t1.device() != t2.device()) {
    raise_error(PyExc_ValueError, op, ": operands on different devices (", t1.device(), " and ",
                t2.device(), ")");
  }
}

void check_launch(const char* op, cudaError_t status, int64_t m, int64_t n, int64_t k) {
  if (status != cudaSuccess) {
    raise_error(PyExc_RuntimeError, op, " failed to launch for m=", m, ", n=", n, ", k=", k, ": ",
                cudaGetErrorName(status), " (", cudaGetErrorString(status), ")");
  }
}

cudaStream_t current_stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

// A [m x k] . B [k x n]: the checks every GEMM version shares.
void check_gemm(const char* op, const at::Tensor& a, const at::Tensor& b,
                std::initializer_list<at::ScalarType> dtypes, bool row_strided = false) {
  check_operand(op, "a", a, dtypes, true, row_strided);
  check_operand(op, "b", b, dtypes, true, row_strided);
  if (a.scalar_type() != b.scalar_type()) {
    raise_error(PyExc_TypeError, op, ": a and b must have one dtype; got ",
                dtype_name(a.scalar_type()), " and ", dtype_name(b.scalar_type()));
  }
  if (a.size(1) != b.size(0)) {
    raise_error(PyExc_ValueError, op, ": inner dimensions differ: a is ", a.sizes(), ", b is ",
                b.sizes(), " (need a.shape[1] == b.shape[0])");
  }
  if (a.size(0) * b.size(1) > INT_MAX) {
    raise_error(PyExc_ValueError, op, ": output ", a.size(0), "x", b.size(1), " has more than ",
                INT_MAX, " elements");
  }
  check_devices(op, "a", a, "b", b);
}

using GemmF32 = cudaError_t (*)(const float*, const float*, float*, int, int, int,
                                cudaStream_t);
using Gemm16 = cudaError_t (*)(const void*, const void*, void*, int, int, int, cudaStream_t);
using Gemm7 = cudaError_t (*)(const void*, const void*, void*, int, int, int, int, int, int,
                              int, int, int, float*, cudaStream_t);

at::Tensor gemm_f32(const char* op, GemmF32 launch, const at::Tensor& a, const at::Tensor& b) {
  check_gemm(op, a, b, {at::kFloat});
  // After the checks: the guard itself would reject a CPU device with a vaguer message.
  // The launch and current_stream() must see the operands' device as current.
  const c10::cuda::CUDAGuard device_guard(a.device());
  at::Tensor c = at::empty({a.size(0), b.size(1)}, a.options());
  if (c.numel() == 0) return c;  // nothing to launch (and a 0-block grid is an error)
  const int m = static_cast<int>(a.size(0)), k = static_cast<int>(a.size(1));
  const int n = static_cast<int>(b.size(1));
  check_launch(op, launch(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), m, n,
                          k, current_stream()),
               m, n, k);
  return c;
}

at::Tensor gemm_16bit(const char* op, Gemm16 launch_bf16, Gemm16 launch_f16, const at::Tensor& a,
                      const at::Tensor& b) {
  check_gemm(op, a, b, {at::kBFloat16, at::kHalf});
  const c10::cuda::CUDAGuard device_guard(a.device());
  at::Tensor c = at::empty({a.size(0), b.size(1)}, a.options());
  if (c.numel() == 0) return c;
  const int m = static_cast<int>(a.size(0)), k = static_cast<int>(a.size(1));
  const int n = static_cast<int>(b.size(1));
  const Gemm16 launch = a.scalar_type() == at::kBFloat16 ? launch_bf16 : launch_f16;
  check_launch(op, launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, current_stream()),
               m, n, k);
  return c;
}

at::Tensor gemm_v1(const at::Tensor& a, const at::Tensor& b) {
  return gemm_f32("gemm v1", gemm_v1_f32, a, b);
}
at::Tensor gemm_v1c(const at::Tensor& a, const at::Tensor& b) {
  return gemm_f32("gemm v1c", gemm_v1c_f32, a, b);
}
at::Tensor gemm_v2(const at::Tensor& a, const at::Tensor& b) {
  return gemm_f32("gemm v2", gemm_v2_f32, a, b);
}
at::Tensor gemm_v3(const at::Tensor& a, const at::Tensor& b) {
  return gemm_f32("gemm v3", gemm_v3_f32, a, b);
}
at::Tensor gemm_v4(const at::Tensor& a, const at::Tensor& b) {
  return gemm_16bit("gemm v4", gemm_v4_bf16, gemm_v4_f16, a, b);
}
at::Tensor gemm_v5(const at::Tensor& a, const at::Tensor& b) {
  return gemm_16bit("gemm v5", gemm_v5_bf16, gemm_v5_f16, a, b);
}
at::Tensor gemm_v6(const at::Tensor& a, const at::Tensor& b) {
  return gemm_16bit("gemm v6", gemm_v6_bf16, gemm_v6_f16, a, b);
}

// Whether gemm_v6 takes its TMA path for these operands (else it runs v5's kernel).
bool gemm_v6_tma_path(const at::Tensor& a, const at::Tensor& b) {
  check_gemm("gemm v6", a, b, {at::kBFloat16, at::kHalf});
  return gemm_v6_uses_tma(a.data_ptr(), b.data_ptr(), static_cast<int>(b.size(1)),
                          static_cast<int>(a.size(1))) != 0;
}

// v7 into `out` (m x n, dense): a is m x k and b is k x n, each with dense rows whose
// strides (lda = a.stride(0), ldb = b.stride(0)) are multiples of 8 (TMA's 16-byte row
// strides): ops.py copies an operand onto wider rows where they are not. `out` is the caller's, so a check can poison it first. With splits > 1
// (split-K) or sk_tiles > 0 (stream-K), `partials` (fp32) holds at least
// v7_workspace_floats(...) floats: the parts before their sum. ctas_per_sm 2 runs two CTAs
// on each SM (block_n 128 without stream-K only).
void gemm_v7(const at::Tensor& a, const at::Tensor& b, at::Tensor& out, int64_t block_n,
             int64_t splits, int64_t sk_tiles, const at::Tensor& partials,
             int64_t ctas_per_sm) {
  constexpr const char* op = "gemm v7";
  check_gemm(op, a, b, {at::kBFloat16, at::kHalf}, /*row_strided=*/true);
  check_operand(op, "out", out, {a.scalar_type()});
  if (out.size(0) != a.size(0) || out.size(1) != b.size(1)) {
    raise_error(PyExc_ValueError, op, ": out is ", out.sizes(), " for a ", a.sizes(), ", b ",
                b.sizes(), " (need out.shape == (a.shape[0], b.shape[1]))");
  }
  if (a.stride(0) % 8 != 0 || b.stride(0) % 8 != 0) {
    raise_error(PyExc_ValueError, op, ": a's rows are ", a.stride(0), " elements apart, b's ",
                b.stride(0), " (need multiples of 8: ops.gemm copies operands onto such rows)");
  }
  if (block_n != 128 && block_n != 192 && block_n != 256) {
    raise_error(PyExc_ValueError, op, ": block_n is ", block_n, "; allowed: 128, 192, 256");
  }
  if (splits < 1 || splits > 64) {
    raise_error(PyExc_ValueError, op, ": splits is ", splits, "; allowed: 1 to 64");
  }
  if (sk_tiles < 0 || (sk_tiles > 0 && splits > 1)) {
    raise_error(PyExc_ValueError, op, ": sk_tiles is ", sk_tiles, " with splits ", splits,
                "; allowed: 0, or stream-K tiles >= 1 with splits 1");
  }
  if (ctas_per_sm != 1 && (ctas_per_sm != 2 || block_n != 128 || sk_tiles > 0)) {
    raise_error(PyExc_ValueError, op, ": ctas_per_sm is ", ctas_per_sm, " with block_n ",
                block_n, " and sk_tiles ", sk_tiles,
                "; allowed: 1, or 2 with block_n 128 and sk_tiles 0");
  }
  check_devices(op, "a", a, "out", out);
  const bool workspace = splits > 1 || sk_tiles > 0;
  const c10::cuda::CUDAGuard device_guard(a.device());
  const int64_t partial_floats = workspace ? gemm_v7_workspace_floats(
      static_cast<int>(a.size(0)), static_cast<int>(out.size(1)), static_cast<int>(a.size(1)),
      static_cast<int>(block_n), static_cast<int>(splits), static_cast<int>(sk_tiles)) : 0;
  if (workspace && (partials.scalar_type() != at::kFloat || !partials.is_contiguous() ||
                    partials.numel() < partial_floats)) {
    raise_error(PyExc_ValueError, op, ": partials must be a contiguous float32 tensor of at "
                "least ", partial_floats, " elements for ", splits, " splits and ", sk_tiles,
                " stream-K tiles; got ", partials.numel(), " elements of ",
                dtype_name(partials.scalar_type()));
  }
  if (workspace) check_devices(op, "a", a, "partials", partials);
  const int m = static_cast<int>(a.size(0)), k = static_cast<int>(a.size(1));
  const int n = static_cast<int>(out.size(1));
  const int lda = static_cast<int>(a.stride(0)), ldb = static_cast<int>(b.stride(0));
  if (out.numel() == 0) return;
  if (k == 0) {
    out.zero_();
    return;
  }
  const Gemm7 launch = a.scalar_type() == at::kBFloat16 ? gemm_v7_bf16 : gemm_v7_f16;
  float* partial_sums = workspace ? partials.data_ptr<float>() : nullptr;
  check_launch(op, launch(a.data_ptr(), b.data_ptr(), out.data_ptr(), m, n, k, lda, ldb,
                          static_cast<int>(block_n), static_cast<int>(splits),
                          static_cast<int>(sk_tiles), static_cast<int>(ctas_per_sm),
                          partial_sums, current_stream()),
               m, n, k);
}

// The fp32 workspace elements one v7 launch needs on the current device (0: none).
int64_t v7_workspace_floats(int64_t m, int64_t n, int64_t k, int64_t block_n, int64_t splits,
                            int64_t sk_tiles) {
  const long long floats = gemm_v7_workspace_floats(
      static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), static_cast<int>(block_n),
      static_cast<int>(splits), static_cast<int>(sk_tiles));
  if (floats < 0) raise_error(PyExc_RuntimeError, "v7_workspace_floats: no CUDA device");
  return floats;
}

// One launch of a tensor-core ceiling probe on the current device and stream; returns the
// FLOP it executes.
int64_t tensor_core_probe(const std::string& instruction, int64_t iterations) {
  constexpr const char* op = "tensor_core_probe";
  if (instruction != "mma.sync" && instruction != "wgmma") {
    raise_error(PyExc_ValueError, op, ": unknown instruction '", instruction,
                "'; valid: mma.sync, wgmma");
  }
  if (iterations < 1 || iterations > (int64_t{1} << 20)) {
    raise_error(PyExc_ValueError, op, ": iterations must be in [1, 1048576]; got ", iterations);
  }
  const int wgmma = instruction == "wgmma" ? 1 : 0;
  at::Tensor out = at::empty({tc_probe_threads(wgmma)},
                             at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  const int count = static_cast<int>(iterations);
  check_launch(op, tc_probe(wgmma, out.data_ptr<float>(), count, current_stream()), count, 1, 1);
  return tc_probe_flop(wgmma, count);
}

// y = x . W, one thread per row of y.
at::Tensor seed_forward(const at::Tensor& x, const at::Tensor& w) {
  constexpr const char* op = "seed_forward";
  check_operand(op, "x", x, {at::kFloat});
  check_operand(op, "w", w, {at::kFloat});
  if (x.size(1) != w.size(0)) {
    raise_error(PyExc_ValueError, op, ": x is ", x.sizes(), ", w is ", w.sizes(),
                " (need x.shape[1] == w.shape[0])");
  }
  check_devices(op, "x", x, "w", w);
  const c10::cuda::CUDAGuard device_guard(x.device());
  at::Tensor y = at::empty({x.size(0), w.size(1)}, x.options());
  if (y.numel() == 0) return y;
  const int rows = static_cast<int>(x.size(0)), in_features = static_cast<int>(x.size(1));
  const int out_features = static_cast<int>(w.size(1));
  check_launch(op,
               seed_forward_f32(x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(),
                                rows, in_features, out_features, current_stream()),
               rows, out_features, in_features);
  return y;
}

// grad_w = x^T . grad_out, one thread per element of grad_w.
at::Tensor seed_weight_grad(const at::Tensor& x, const at::Tensor& grad_out) {
  constexpr const char* op = "seed_weight_grad";
  check_operand(op, "x", x, {at::kFloat});
  check_operand(op, "grad_out", grad_out, {at::kFloat});
  if (x.size(0) != grad_out.size(0)) {
    raise_error(PyExc_ValueError, op, ": x is ", x.sizes(), ", grad_out is ", grad_out.sizes(),
                " (need the same number of rows)");
  }
  check_devices(op, "x", x, "grad_out", grad_out);
  const c10::cuda::CUDAGuard device_guard(x.device());
  at::Tensor grad_w = at::empty({x.size(1), grad_out.size(1)}, x.options());
  if (grad_w.numel() == 0) return grad_w;
  const int rows = static_cast<int>(x.size(0)), in_features = static_cast<int>(x.size(1));
  const int out_features = static_cast<int>(grad_out.size(1));
  check_launch(op,
               seed_weight_grad_f32(x.data_ptr<float>(), grad_out.data_ptr<float>(),
                                    grad_w.data_ptr<float>(), rows, in_features, out_features,
                                    current_stream()),
               in_features, out_features, rows);
  return grad_w;
}

// w -= lr * grad in place, one thread per element; any shape, as long as both match.
void seed_sgd_(const at::Tensor& w, const at::Tensor& grad, double lr) {
  constexpr const char* op = "seed_sgd_";
  check_operand(op, "w", w, {at::kFloat}, /*matrix=*/false);
  check_operand(op, "grad", grad, {at::kFloat}, /*matrix=*/false);
  if (w.sizes() != grad.sizes()) {
    raise_error(PyExc_ValueError, op, ": w is ", w.sizes(), ", grad is ", grad.sizes(),
                " (need the same shape)");
  }
  check_devices(op, "w", w, "grad", grad);
  const c10::cuda::CUDAGuard device_guard(w.device());
  if (w.numel() == 0) return;
  check_launch(op,
               seed_sgd_f32(w.data_ptr<float>(), grad.data_ptr<float>(), static_cast<float>(lr),
                            w.numel(), current_stream()),
               w.numel(), 1, 1);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "overlap-suite hand-written CUDA kernels (see impl/kernels/ops.py for the API)";
  m.def("gemm_v1", &gemm_v1, "C = A @ B, naive (fp32)", py::arg("a"), py::arg("b"));
  m.def("gemm_v1c", &gemm_v1c, "C = A @ B, naive with coalesced thread mapping (fp32)",
        py::arg("a"), py::arg("b"));
  m.def("gemm_v2", &gemm_v2, "C = A @ B, shared-memory tiles (fp32)", py::arg("a"),
        py::arg("b"));
  m.def("gemm_v3", &gemm_v3, "C = A @ B, register blocking (fp32)", py::arg("a"), py::arg("b"));
  m.def("gemm_v4", &gemm_v4, "C = A @ B, WMMA tensor cores (bf16/fp16 in and out)",
        py::arg("a"), py::arg("b"));
  m.def("gemm_v5", &gemm_v5, "C = A @ B, mma.sync + ldmatrix tensor cores (bf16/fp16)",
        py::arg("a"), py::arg("b"));
  m.def("gemm_v6", &gemm_v6, "C = A @ B, TMA + wgmma tensor cores, sm_90a (bf16/fp16)",
        py::arg("a"), py::arg("b"));
  m.def("gemm_v6_tma_path", &gemm_v6_tma_path, "whether gemm_v6 runs its TMA kernel",
        py::arg("a"), py::arg("b"));
  m.def("gemm_v7", &gemm_v7, "out = A @ B, persistent TMA + wgmma, sm_90a (bf16/fp16)",
        py::arg("a"), py::arg("b"), py::arg("out"), py::arg("block_n"), py::arg("splits"),
        py::arg("sk_tiles"), py::arg("partials"), py::arg("ctas_per_sm") = 1);
  m.def("v7_workspace_floats", &v7_workspace_floats,
        "fp32 workspace elements one v7 launch needs (split-K parts or stream-K planes)",
        py::arg("m"), py::arg("n"), py::arg("k"), py::arg("block_n"), py::arg("splits"),
        py::arg("sk_tiles"));
  m.def("tensor_core_probe", &tensor_core_probe, "tensor-core ceiling probe; returns its FLOP",
        py::arg("instruction"), py::arg("iterations"));
  m.def("seed_forward", &seed_forward, "y = x @ w, one thread per row of y", py::arg("x"),
        py::arg("w"));
  m.def("seed_weight_grad", &seed_weight_grad, "grad_w = x.T @ grad_out", py::arg("x"),
        py::arg("grad_out"));
  m.def("seed_sgd_", &seed_sgd_, "w -= lr * grad in place", py::arg("w"), py::arg("grad"),
        py::arg("lr"));
}
