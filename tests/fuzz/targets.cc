#include "fuzz/targets.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/float_types.h"
#include "core/memory_limit.h"
#include "core/utf8.h"
#include "model/onnx_loader.h"
#include "runtime/session.h"

#ifndef OCTET_SOURCE_DIR
#error "OCTET_SOURCE_DIR must name the source tree (CMakeLists.txt sets it)"
#endif

namespace octet::fuzz {

namespace {

void AbortOnFinding(const std::string& what) {
  std::fprintf(stderr, "octet fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

FindingHandler finding_handler = AbortOnFinding;

void Finding(const std::string& what) {
  finding_handler(what);
  std::abort();  // a handler must not return
}

// OCTET_FUZZ_VERBOSE=1 prints every octet::Error (to see what a kept input exercises).
const bool verbose = [] {
  const char* env = std::getenv("OCTET_FUZZ_VERBOSE");
  return env && std::string(env) == "1";
}();

// An octet::Error is the expected answer; an InternalError is a bug octet found in itself
// (so is a plain Error that starts "internal: ", as the int8 kernels still throw them).
void CheckError(const Error& e, const char* where) {
  const std::string what = e.what();
  if (verbose) std::fprintf(stderr, "octet fuzz: %s: %s\n", where, what.c_str());
  if (dynamic_cast<const InternalError*>(&e) != nullptr || what.rfind("internal: ", 0) == 0)
    Finding(std::string(where) + " failed with an internal error: " + what);
}

// ---- feeds ------------------------------------------------------------------------------

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  size_t remaining() const { return size_ - pos_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

constexpr double kSpecialFloats[16] = {0.0,     -0.0,     1.0,       -1.0,  0.5,   2.0,
                                       127.0,   -128.0,   255.0,     1e-45, 1e-38, 3.4e38,
                                       -3.4e38, INFINITY, -INFINITY, NAN};
constexpr int64_t kSpecialInts[16] = {0,
                                      1,
                                      -1,
                                      2,
                                      127,
                                      -128,
                                      255,
                                      32767,
                                      -32768,
                                      65535,
                                      std::numeric_limits<int32_t>::max(),
                                      std::numeric_limits<int32_t>::min(),
                                      std::numeric_limits<int64_t>::max(),
                                      std::numeric_limits<int64_t>::min(),
                                      int64_t{1} << 31,
                                      int64_t{1} << 32};

// Writes element i of t from a number (an integer or a float, as the mode gives it).
void Store(Tensor& t, int64_t i, double f, int64_t n, bool is_float) {
  const double v = is_float ? f : static_cast<double>(n);
  // Integer elements from a float value go through int64 only when it is in range.
  auto as_int = [&]() -> int64_t {
    if (!is_float) return n;
    return std::isfinite(f) && std::fabs(f) < 9.2e18 ? static_cast<int64_t>(f) : 0;
  };
  switch (t.dtype()) {
    case DType::kFloat32:
      t.data<float>()[i] = static_cast<float>(v);
      return;
    case DType::kFloat64:
      t.data<double>()[i] = v;
      return;
    case DType::kFloat16:
      static_cast<uint16_t*>(t.raw())[i] = FloatToFloat16Bits(static_cast<float>(v));
      return;
    case DType::kBFloat16:
      static_cast<uint16_t*>(t.raw())[i] = FloatToBFloat16Bits(static_cast<float>(v));
      return;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
      static_cast<uint8_t*>(t.raw())[i] = FloatToFloat8Bits(static_cast<float>(v), t.dtype(), true);
      return;
    case DType::kBool:
      static_cast<uint8_t*>(t.raw())[i] = as_int() & 1;
      return;
    case DType::kInt4:
      static_cast<int8_t*>(t.raw())[i] = static_cast<int8_t>(((as_int() & 15) ^ 8) - 8);
      return;
    case DType::kUInt4:
      static_cast<uint8_t*>(t.raw())[i] = static_cast<uint8_t>(as_int() & 15);
      return;
    default:
      break;
  }
  // Integers wrap to the element's width, as a little-endian copy of the int64 does.
  const int64_t value = as_int();
  std::memcpy(static_cast<uint8_t*>(t.raw()) + i * DTypeSize(t.dtype()), &value,
              DTypeSize(t.dtype()));
}

// Raw bytes keep the API's invariants: bool elements are 0 or 1, 4-bit elements are in range.
void Sanitize(Tensor& t) {
  auto* bytes = static_cast<uint8_t*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype() == DType::kBool) bytes[i] &= 1;
    if (t.dtype() == DType::kUInt4) bytes[i] &= 15;
    if (t.dtype() == DType::kInt4)
      bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(((bytes[i] & 15) ^ 8) - 8));
  }
}

void Fill(Tensor& t, int mode, Reader& values) {
  if (mode == 0) {
    auto* bytes = static_cast<uint8_t*>(t.raw());
    for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = values.Byte();
    Sanitize(t);
    return;
  }
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint8_t b = values.Byte();
    if (mode == 1)
      Store(t, i, 0, static_cast<int8_t>(b), false);
    else if (mode == 2 && IsFloatingPoint(t.dtype()))
      Store(t, i, kSpecialFloats[b % 16], 0, true);
    else if (mode == 2)
      Store(t, i, 0, kSpecialInts[b % 16], false);
    else
      Store(t, i, 0, b & 1, false);
  }
}

struct FeedSpec {
  std::string name;
  DType dtype;
  Shape shape;
  int mode;
};

// Decodes the headers (tools/fuzz_seeds.py documents the format); nullopt when a feed
// would be larger than kMaxFeedElements.
std::optional<std::vector<FeedSpec>> DecodeFeeds(const std::vector<TensorInfo>& inputs,
                                                 int64_t max_elements, Reader& r) {
  std::vector<FeedSpec> specs;
  std::map<std::string, int64_t> symbols;
  for (const TensorInfo& info : inputs) {
    const uint8_t flags = r.Byte();
    FeedSpec spec{info.name, info.dtype, {}, flags & 3};
    if (flags & 4) {
      const auto dtype = static_cast<DType>(r.Byte() % 23 + 1);
      if (IsSupportedStorage(dtype)) spec.dtype = dtype;
    }
    if (flags & 8) {
      const int rank = r.Byte() % 6;
      for (int d = 0; d < rank; ++d) spec.shape.push_back(r.Byte());
    } else if (!info.has_shape) {
      const int rank = r.Byte() % 5;
      for (int d = 0; d < rank; ++d) spec.shape.push_back(r.Byte() % 17);
    } else {
      for (const Dim& dim : info.shape) {
        if (dim.value) {
          spec.shape.push_back(*dim.value);
        } else if (!dim.symbol.empty()) {
          auto [it, inserted] = symbols.emplace(dim.symbol, 0);
          if (inserted) it->second = r.Byte() % 17;
          spec.shape.push_back(it->second);
        } else {
          spec.shape.push_back(r.Byte() % 17);
        }
      }
    }
    int64_t numel = 1;
    for (int64_t d : spec.shape) {
      numel *= d;
      if (numel > max_elements) return std::nullopt;
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

// ---- run models -------------------------------------------------------------------------

struct RunModel {
  std::string name;
  std::unique_ptr<InferenceSession> one_thread, two_threads;
  int64_t max_feed_elements;
};

std::string run_models_dir;

std::vector<RunModel>& RunModels() {
  static std::vector<RunModel>* models = nullptr;
  if (models) return *models;
  models = new std::vector<RunModel>;
  std::string dir = run_models_dir;
  if (dir.empty()) {
    const char* env = std::getenv("OCTET_FUZZ_MODELS");
    dir = env ? env : OCTET_SOURCE_DIR "/build/fuzz/models";
  }
  std::ifstream list(OCTET_SOURCE_DIR "/tests/fuzz/run_models.txt");
  std::string line;
  while (std::getline(list, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::string path = dir + "/" + line + ".onnx";
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    if (!file) continue;
    const bool large = file.tellg() > (1 << 20);
    RunModel m{line, nullptr, nullptr, large ? kLargeModelMaxFeedElements : kMaxFeedElements};
    const uint64_t max_bytes = large ? kMaxTensorBytes : kSmallModelMaxTensorBytes;
    try {
      m.one_thread =
          InferenceSession::FromFile(path, {.threads = 1, .max_tensor_bytes = max_bytes});
      m.two_threads =
          InferenceSession::FromFile(path, {.threads = 2, .max_tensor_bytes = max_bytes});
    } catch (const Error& e) {
      Finding("run model " + path + " does not load: " + e.what());
    }
    models->push_back(std::move(m));
  }
  return *models;
}

std::string Describe(const std::vector<Tensor>& outputs, size_t i) {
  const Tensor& t = outputs[i];
  return "output " + std::to_string(i) + " " + DTypeName(t.dtype()) + " " +
         ShapeToString(t.shape());
}

// The outputs of two runs, byte for byte; empty when equal.
std::string Difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return "different output counts";
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype() != b[i].dtype() || a[i].shape() != b[i].shape())
      return Describe(a, i) + " vs " + Describe(b, i);
    if (a[i].nbytes() && std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()) != 0)
      return Describe(a, i) + ": different bytes";
  }
  return "";
}

}  // namespace

void SetFindingHandler(FindingHandler handler) {
  finding_handler = handler ? handler : AbortOnFinding;
}

// Text of a loaded model reaches users (Python str): it must be UTF-8.
void CheckText(const std::string& text, const char* what) {
  if (InvalidUtf8Offset(text) != std::string_view::npos)
    Finding(std::string("a loaded model's ") + what + " is not UTF-8: '" + EscapeInvalidUtf8(text) +
            "'");
}

void CheckGraphText(const Graph& g) {
  for (const Value& v : g.values) {
    CheckText(v.name, "value name");
    if (v.shape)
      for (const Dim& d : *v.shape) CheckText(d.symbol, "dimension symbol");
  }
  for (const Node& n : g.nodes) {
    CheckText(n.name, "node name");
    CheckText(n.op_type, "op_type");
    CheckText(n.domain, "domain");
    for (const auto& [name, a] : n.attributes) {
      CheckText(name, "attribute name");
      CheckText(a.s, "string attribute");
      for (const std::string& s : a.strings) CheckText(s, "string attribute");
    }
  }
}

int FuzzLoader(const uint8_t* data, size_t size) {
  const TensorByteLimit limit(kMaxTensorBytes);
  try {
    const Model model = LoadModelFromBytes(data, size, "");
    CheckText(model.producer_name, "producer_name");
    CheckGraphText(model.graph);
  } catch (const Error& e) {
    CheckError(e, "LoadModelFromBytes");
  }
  return 0;
}

int FuzzSession(const uint8_t* data, size_t size) {
  std::unique_ptr<InferenceSession> session;
  try {
    session = InferenceSession::FromBytes(data, size,
                                          {.threads = 1, .max_tensor_bytes = kMaxTensorBytes});
  } catch (const Error& e) {
    CheckError(e, "InferenceSession::FromBytes");
    return 0;
  }
  for (const auto* infos : {&session->inputs(), &session->outputs()})
    for (const TensorInfo& info : *infos) {
      CheckText(info.name, "input or output name");
      for (const Dim& d : info.shape) CheckText(d.symbol, "dimension symbol");
    }
  // Zero feeds: declared dtypes, static dims as declared, other dims 1.
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const TensorInfo& info : session->inputs()) {
    Shape shape;
    for (const Dim& d : info.shape) shape.push_back(d.value.value_or(1));
    int64_t numel = 1;
    for (int64_t d : shape)
      if ((numel *= d) > kMaxFeedElements) return 0;
    try {
      feeds.emplace_back(info.name, Tensor(info.dtype, shape));
    } catch (const Error& e) {
      CheckError(e, "a feed");
      return 0;
    }
  }
  try {
    session->Run(feeds);
  } catch (const Error& e) {
    CheckError(e, "InferenceSession::Run");
  }
  return 0;
}

int FuzzRun(const uint8_t* data, size_t size) {
  std::vector<RunModel>& models = RunModels();
  if (models.empty()) return 0;
  Reader r(data, size);
  RunModel& m = models[r.Byte() % models.size()];
  const bool compare_threads = r.Byte() & 1;
  const std::optional<std::vector<FeedSpec>> specs =
      DecodeFeeds(m.one_thread->inputs(), m.max_feed_elements, r);
  if (!specs) return 0;
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const FeedSpec& spec : *specs) {
    Tensor t(spec.dtype, spec.shape);
    feeds.emplace_back(spec.name, std::move(t));
  }
  for (size_t i = 0; i < specs->size(); ++i) Fill(feeds[i].second, (*specs)[i].mode, r);

  std::vector<Tensor> outputs;
  std::string error;
  try {
    outputs = m.one_thread->Run(feeds);
  } catch (const Error& e) {
    CheckError(e, ("run of " + m.name).c_str());
    error = e.what();
  }
  if (!compare_threads) return 0;
  std::vector<Tensor> outputs2;
  std::string error2;
  try {
    outputs2 = m.two_threads->Run(feeds);
  } catch (const Error& e) {
    CheckError(e, ("2-thread run of " + m.name).c_str());
    error2 = e.what();
  }
  if (error != error2)
    Finding(m.name + ": 1 and 2 threads fail differently: '" + error + "' vs '" + error2 + "'");
  const std::string difference = Difference(outputs, outputs2);
  if (!difference.empty())
    Finding(m.name + ": 1 and 2 threads give different outputs: " + difference);
  return 0;
}

void SetRunModelsDir(const std::string& dir) { run_models_dir = dir; }

size_t RunModelsFound() { return RunModels().size(); }

}  // namespace octet::fuzz
