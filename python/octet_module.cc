// octet._octet: the pybind11 binding of the C++ InferenceSession. It moves raw
// tensor bytes in and out; numpy dtype mapping and checks live in
// octet/__init__.py.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "runtime/introspect.h"
#include "runtime/session.h"

namespace py = pybind11;

namespace octet {
namespace {

// The numpy dtype that holds a tensor's storage: bit patterns for float16 /
// bfloat16 / float8, int8 / uint8 values for int4 / uint4 (one per byte).
py::dtype StorageDType(DType t) {
  switch (t) {
    case DType::kFloat32:
      return py::dtype::of<float>();
    case DType::kFloat64:
      return py::dtype::of<double>();
    case DType::kInt8:
    case DType::kInt4:
      return py::dtype::of<int8_t>();
    case DType::kUInt8:
    case DType::kUInt4:
    case DType::kBool:
      return py::dtype::of<uint8_t>();
    case DType::kInt16:
      return py::dtype::of<int16_t>();
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return py::dtype::of<uint16_t>();
    case DType::kInt32:
      return py::dtype::of<int32_t>();
    case DType::kUInt32:
      return py::dtype::of<uint32_t>();
    case DType::kInt64:
      return py::dtype::of<int64_t>();
    case DType::kUInt64:
      return py::dtype::of<uint64_t>();
    default:
      if (IsFloat8(t)) return py::dtype::of<uint8_t>();
      Fail("tensors of type ", DTypeName(t), " cannot be passed to Python");
  }
}

// (name, dtype code, shape, has_shape); shape entries are int, symbol str or
// None.
py::list Describe(const std::vector<TensorInfo> &infos) {
  py::list result;
  for (const TensorInfo &info : infos) {
    py::list shape;
    for (const Dim &d : info.shape) {
      if (d.value)
        shape.append(py::int_(*d.value));
      else if (!d.symbol.empty())
        shape.append(py::str(d.symbol));
      else
        shape.append(py::none());
    }
    result.append(py::make_tuple(info.name, static_cast<int>(info.dtype), DTypeName(info.dtype),
                                 shape, info.has_shape));
  }
  return result;
}

class PySession {
 public:
  // model: the serialized model, or (is_path) a file path as os.fsencode gives it, so
  // that any path the OS accepts arrives unchanged.
  PySession(const py::bytes &model, bool is_path, int threads, const std::string &float_matmul,
            bool keep_intermediates, uint64_t max_tensor_bytes,
            const std::vector<std::string> &last_row_outputs) {
    SessionOptions options;
    options.threads = threads;
    OCTET_CHECK(float_matmul == "float" || float_matmul == "int8",
                "float_matmul must be 'float' or 'int8', got '", float_matmul, "'");
    options.float_matmul = float_matmul == "int8" ? FloatMatMul::kInt8 : FloatMatMul::kFloat;
    options.keep_intermediates = keep_intermediates;
    options.last_row_outputs = last_row_outputs;
    options.max_tensor_bytes = max_tensor_bytes;
    std::string bytes = model;
    py::gil_scoped_release release;
    if (is_path)
      session_ = InferenceSession::FromFile(bytes, options);
    else
      session_ = InferenceSession::FromBytes(bytes.data(), bytes.size(), options);
    for (const TensorInfo &info : session_->inputs())
      if (info.reads_only_own_bytes) read_in_bounds_.insert(info.name);
  }

  // Whether a feed's bytes can be read in place instead of copied (a 1 MB copy
  // cost a 208 x 208 convolution 40-55 us of its 700). The data must be
  // aligned for its elements. Unless every kernel reading the input reads only
  // its bytes (TensorInfo::reads_only_own_bytes), kernels may read to the end
  // of the 64-byte line after its last byte (counted from its start) and find
  // zeros there (core/tensor.cc), so those bytes must lie in the page of the
  // feed's last byte (mapped, hence readable) and be zero. The session only
  // reads feeds, and an output that shares their bytes is copied (a view owns
  // nothing).
  bool ReadableInPlace(const std::string &name, const void *data, size_t nbytes,
                       size_t element_size) const {
    const auto begin = reinterpret_cast<uintptr_t>(data);
    if (nbytes == 0 || begin % element_size != 0) return false;
    if (read_in_bounds_.count(name)) return true;
    const uintptr_t end = begin + nbytes, padded_end = begin + (nbytes + 63) / 64 * 64 + 64;
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    if ((end - 1) / page != (padded_end - 1) / page) return false;
    const auto *tail = reinterpret_cast<const volatile unsigned char *>(end);
    for (uintptr_t i = 0; i < padded_end - end; ++i)
      if (tail[i] != 0) return false;
    return true;
  }

  py::list inputs() const { return Describe(session_->inputs()); }
  // The inputs read in place whatever memory follows them (for the tests).
  std::vector<std::string> inputs_read_in_place() const {
    return {read_in_bounds_.begin(), read_in_bounds_.end()};
  }
  py::list outputs() const { return Describe(session_->outputs()); }
  py::list intermediates() const { return Describe(session_->intermediates()); }
  void set_profiling(bool on) { session_->SetProfiling(on); }
  // (runs, [(op, seconds, calls), ...]) with the most time first.
  py::tuple profile() const {
    const SessionProfile p = session_->Profile();
    py::list ops;
    for (const OpTime &t : p.ops) ops.append(py::make_tuple(t.op, t.seconds, t.calls));
    return py::make_tuple(p.runs, ops);
  }

  // feeds: (name, dtype code, C-contiguous storage array); returns
  // (dtype code, storage array) per output.
  std::unique_ptr<KvCache> NewKvCache(int64_t reserve_rows) {
    return session_->NewKvCache(reserve_rows);
  }

  py::list Run(const std::vector<std::string> &output_names, const py::list &feeds,
               KvCache *cache) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const py::handle &item : feeds) {
      auto [name, code, array] = item.cast<std::tuple<std::string, int, py::array>>();
      Shape shape(array.shape(), array.shape() + array.ndim());
      const auto dtype = static_cast<DType>(code);
      const auto nbytes = static_cast<size_t>(array.nbytes());
      OCTET_CHECK(nbytes == static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype),
                  "internal: input '", name, "' has ", nbytes, " bytes, expected ",
                  NumElements(shape) * DTypeSize(dtype));
      if (ReadableInPlace(name, array.data(), nbytes, DTypeSize(dtype))) {
        tensors.emplace_back(name, Tensor::View(dtype, shape, const_cast<void *>(array.data())));
        continue;
      }
      // A fresh tensor with octet's padding; not zero-filled first: the copy
      // writes every byte.
      Tensor t = Tensor::Uninitialized(dtype, shape);
      if (nbytes) std::memcpy(t.raw(), array.data(), nbytes);
      tensors.emplace_back(name, std::move(t));
    }
    std::vector<Tensor> results;
    {
      py::gil_scoped_release release;
      results = cache ? session_->Run(tensors, output_names, *cache)
                      : session_->Run(tensors, output_names);
    }
    py::list out;
    for (Tensor &t : results) {
      std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
      if (t.SoleOwner()) {
        // Nothing else (an initializer, a feed, another output) shares these
        // bytes: numpy takes the tensor over instead of copying it.
        auto *owned = new Tensor(std::move(t));
        py::capsule release(owned, [](void *p) { delete static_cast<Tensor *>(p); });
        out.append(
            py::make_tuple(static_cast<int>(owned->dtype()),
                           py::array(StorageDType(owned->dtype()), shape, owned->raw(), release)));
        continue;
      }
      py::array array(StorageDType(t.dtype()), shape);
      if (t.nbytes()) std::memcpy(array.mutable_data(), t.raw(), t.nbytes());
      out.append(py::make_tuple(static_cast<int>(t.dtype()), array));
    }
    return out;
  }

 private:
  std::unique_ptr<InferenceSession> session_;
  std::set<std::string> read_in_bounds_;  // inputs fed in place whatever follows them
};

}  // namespace
}  // namespace octet

PYBIND11_MODULE(_octet, m) {
  m.doc() = "octet engine binding; use the octet package, not this module";
  static PyObject *const octet_error =
      py::register_exception<octet::Error>(m, "OctetError", PyExc_RuntimeError).ptr();
  // Tried before the translator above: every C++ failure becomes an OctetError whose
  // message is valid UTF-8 (a message quoting a path or a model's bytes may not be, and
  // PyErr_SetString would then raise UnicodeDecodeError instead). pybind11's own
  // exceptions (TypeError and the like for wrong argument types) pass on.
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const octet::Error &e) {
      PyErr_SetString(octet_error, octet::EscapeInvalidUtf8(e.what()).c_str());
    } catch (const std::bad_alloc &) {
      PyErr_SetString(octet_error, "out of memory (std::bad_alloc)");
    } catch (const py::builtin_exception &) {
      throw;
    } catch (const std::exception &e) {
      PyErr_SetString(octet_error,
                      ("internal error: " + octet::EscapeInvalidUtf8(e.what())).c_str());
    }
  });
  py::class_<octet::PySession>(m, "Session")
      .def(py::init<const py::bytes &, bool, int, const std::string &, bool, uint64_t,
                    const std::vector<std::string> &>(),
           py::arg("model"), py::arg("is_path"), py::arg("threads"), py::arg("float_matmul"),
           py::arg("keep_intermediates"), py::arg("max_tensor_bytes"), py::arg("last_row_outputs"))
      .def("inputs", &octet::PySession::inputs)
      .def("inputs_read_in_place", &octet::PySession::inputs_read_in_place)
      .def("outputs", &octet::PySession::outputs)
      .def("intermediates", &octet::PySession::intermediates)
      .def("set_profiling", &octet::PySession::set_profiling, py::arg("on"))
      .def("profile", &octet::PySession::profile)
      .def("new_kv_cache", &octet::PySession::NewKvCache, py::arg("reserve_rows"))
      .def("run", &octet::PySession::Run, py::arg("output_names"), py::arg("feeds"),
           py::arg("kv_cache").none(true));
  py::class_<octet::KvCache, std::unique_ptr<octet::KvCache>>(m, "KvCache")
      .def_property_readonly("length", &octet::KvCache::length)
      .def("truncate", &octet::KvCache::Truncate, py::arg("length"))
      .def_property_readonly("inputs", &octet::KvCache::inputs)
      .def_property_readonly("outputs", &octet::KvCache::outputs);
  m.def("active_isa", &octet::ActiveIsaName);
  m.def("supported_isas", &octet::SupportedIsaNames);
  m.def(
      "describe_rewrites",
      [](const py::bytes &path) { return octet::DescribeModelRewrites(std::string(path)); },
      py::arg("path"));
  m.def("registered_kernels", [] {
    py::list kernels;
    for (const octet::KernelInfo &k : octet::RegisteredKernels())
      kernels.append(py::make_tuple(k.domain, k.op_type, k.since_version, k.end_version));
    return kernels;
  });
}
