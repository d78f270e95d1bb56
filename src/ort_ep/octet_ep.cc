// liboctet_ep.so: octet as an ONNX Runtime plugin execution provider (docs/ort-ep.md).
//
// A front end (docs/design.md): it converts ORT's graph to octet's IR and uses only the
// runtime API. GetCapability asks runtime/introspect.h's PlanClaims which nodes octet
// takes (the int8 groups its rewrites fold, the integer operators, and the nodes it runs
// between them) and hands ORT one fused node per piece; Compile makes one
// octet::InferenceSession per piece (the same rewrites and kernels as the standalone
// engine; weights packed once there); Compute feeds it ORT's tensors.
//
// Built against the C headers of Debian sid's libonnxruntime-dev (scripts/
// fetch_ort_headers.sh, version in OCTET_ORT_HEADERS_VERSION); ORT keeps older API
// versions working, so the library loads in newer runtimes (tested with 1.31.1).
#include <onnxruntime_c_api.h>  // includes onnxruntime_ep_c_api.h (which has no include guard)
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "graph/graph.h"
#include "runtime/introspect.h"
#include "runtime/session.h"

#ifndef OCTET_VERSION_STRING
#define OCTET_VERSION_STRING "0.0.0"
#endif
#ifndef OCTET_ORT_HEADERS_VERSION
#define OCTET_ORT_HEADERS_VERSION "unknown"
#endif

namespace octet_ep {

constexpr const char* kEpName = "OctetExecutionProvider";
constexpr const char* kVendor = "octet";

const OrtApi* g_ort = nullptr;
const OrtEpApi* g_ep = nullptr;

// A failed ORT call inside code that throws: turned into an octet::Error with ORT's text.
void Check(OrtStatus* status) {
  if (status == nullptr) return;
  std::string message = g_ort->GetErrorMessage(status);
  g_ort->ReleaseStatus(status);
  octet::Fail("onnxruntime: ", message);
}

OrtStatus* StatusFrom(const std::exception& e) {
  return g_ort->CreateStatus(ORT_EP_FAIL, (std::string("octet: ") + e.what()).c_str());
}

void Log(const OrtLogger* logger, OrtLoggingLevel level, const std::string& message) {
  if (logger == nullptr) return;
  OrtStatus* status =
      g_ort->Logger_LogMessage(logger, level, message.c_str(), ORT_FILE, __LINE__, "octet_ep");
  if (status) g_ort->ReleaseStatus(status);
}

// ---- EP options ----------------------------------------------------------------------

struct Options {
  int threads = 0;  // 0: one per core (ORT's meaning of 0)
  bool qdq = true;
  bool debug = false;
  bool regions = true;
  bool float_matmul_int8 = false;
};

int ParseInt(const std::string& key, const std::string& value, int lo, int hi) {
  size_t used = 0;
  long v = 0;
  try {
    v = std::stol(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  OCTET_CHECK(used == value.size() && !value.empty() && v >= lo && v <= hi, kEpName, ": option ",
              key, "='", value, "' must be an integer in [", lo, ", ", hi, "]");
  return static_cast<int>(v);
}

bool ParseBool(const std::string& key, const std::string& value) {
  if (value == "1") return true;
  if (value == "0") return false;
  octet::Fail(kEpName, ": option ", key, "='", value, "' must be 0 or 1");
}

// Reads the EP's options from the session's config entries, where ORT puts them as
// "ep.<ep name>.<key>" (the name lower-cased).
Options ReadOptions(const OrtSessionOptions* session_options) {
  Options options;
  OrtKeyValuePairs* entries = nullptr;
  Check(g_ort->GetSessionOptionsConfigEntries(session_options, &entries));
  const char* const* keys = nullptr;
  const char* const* values = nullptr;
  size_t count = 0;
  g_ort->GetKeyValuePairs(entries, &keys, &values, &count);
  std::string prefix = std::string("ep.") + kEpName + ".";
  std::transform(prefix.begin(), prefix.end(), prefix.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  try {
    for (size_t i = 0; i < count; ++i) {
      std::string key = keys[i];
      std::string lower = key;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      if (lower.rfind(prefix, 0) != 0) continue;
      const std::string name = key.substr(prefix.size());
      const std::string value = values[i];
      if (name == "threads") {
        options.threads = ParseInt(name, value, 0, 1024);
      } else if (name == "qdq") {
        options.qdq = ParseBool(name, value);
      } else if (name == "debug") {
        options.debug = ParseBool(name, value);
      } else if (name == "regions") {
        options.regions = ParseBool(name, value);
      } else if (name == "float_matmul") {
        OCTET_CHECK(value == "int8" || value == "float", kEpName, ": option float_matmul='", value,
                    "' must be 'float' or 'int8'");
        options.float_matmul_int8 = value == "int8";
      } else {
        octet::Fail(kEpName, ": unknown option '", name,
                    "'; the options are threads, qdq, debug, regions, float_matmul");
      }
    }
  } catch (...) {
    g_ort->ReleaseKeyValuePairs(entries);
    throw;
  }
  g_ort->ReleaseKeyValuePairs(entries);
  return options;
}

octet::SessionOptions SessionOptionsFor(const Options& o) {
  octet::SessionOptions s;
  s.threads = o.threads;
  s.rewrites = o.qdq;
  s.float_matmul = o.float_matmul_int8 ? octet::FloatMatMul::kInt8 : octet::FloatMatMul::kFloat;
  return s;
}

// ---- ORT graph -> octet graph ----------------------------------------------------------

bool SupportedBoundaryType(octet::DType t) {
  // ORT packs 4-bit tensors two to a byte, octet holds one per byte; strings are not bytes.
  return t != octet::DType::kUndefined && t != octet::DType::kInt4 && t != octet::DType::kUInt4 &&
         t != octet::DType::kString;
}

struct TypeAndShape {
  bool is_tensor = false;
  octet::DType dtype = octet::DType::kUndefined;
  std::optional<std::vector<octet::Dim>> shape;
};

TypeAndShape ReadTypeInfo(const OrtValueInfo* info) {
  TypeAndShape out;
  const OrtTypeInfo* type_info = nullptr;
  Check(g_ort->GetValueInfoTypeInfo(info, &type_info));
  if (type_info == nullptr) return out;
  ONNXType onnx_type = ONNX_TYPE_UNKNOWN;
  Check(g_ort->GetOnnxTypeFromTypeInfo(type_info, &onnx_type));
  if (onnx_type != ONNX_TYPE_TENSOR) return out;
  const OrtTensorTypeAndShapeInfo* tensor_info = nullptr;
  Check(g_ort->CastTypeInfoToTensorInfo(type_info, &tensor_info));
  if (tensor_info == nullptr) return out;
  out.is_tensor = true;
  ONNXTensorElementDataType elem = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  Check(g_ort->GetTensorElementType(tensor_info, &elem));
  out.dtype = static_cast<octet::DType>(elem);  // both are ONNX's TensorProto.DataType codes
  size_t rank = 0;
  Check(g_ort->GetDimensionsCount(tensor_info, &rank));
  std::vector<int64_t> dims(rank);
  std::vector<const char*> symbols(rank, nullptr);
  Check(g_ort->GetDimensions(tensor_info, dims.data(), rank));
  Check(g_ort->GetSymbolicDimensions(tensor_info, symbols.data(), rank));
  // ORT reports an unknown rank as rank 0 with no shape; a real scalar also has rank 0,
  // so a rank-0 value is read as "shape unknown" (octet then checks nothing).
  if (rank == 0) return out;
  std::vector<octet::Dim> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (dims[i] >= 0) {
      shape[i].value = dims[i];
    } else if (symbols[i] && symbols[i][0]) {
      shape[i].symbol = symbols[i];
    }
  }
  out.shape = std::move(shape);
  return out;
}

// The element type, shape and data of a tensor OrtValue.
struct TensorParts {
  octet::DType dtype{};
  octet::Shape shape;
  const void* data = nullptr;
};

TensorParts PartsOf(const OrtValue* value) {
  OrtTensorTypeAndShapeInfo* type_shape = nullptr;
  Check(g_ort->GetTensorTypeAndShape(value, &type_shape));
  ONNXTensorElementDataType elem = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  size_t rank = 0;
  OrtStatus* status = g_ort->GetTensorElementType(type_shape, &elem);
  if (!status) status = g_ort->GetDimensionsCount(type_shape, &rank);
  std::vector<int64_t> dims(rank);
  if (!status) status = g_ort->GetDimensions(type_shape, dims.data(), rank);
  g_ort->ReleaseTensorTypeAndShapeInfo(type_shape);
  Check(status);
  TensorParts parts;
  parts.dtype = static_cast<octet::DType>(elem);
  parts.shape.assign(dims.begin(), dims.end());
  Check(g_ort->GetTensorData(value, &parts.data));
  return parts;
}

// A constant initializer as a view of ORT's memory, valid while ORT keeps it: during
// GetCapability (the plan only reads it) and Compile (the session copies what it keeps,
// SessionOptions::borrowed_initializers: octet tensors carry zeros to the end of their last
// 64-byte line, which kernels may read, and ORT may free its copy after Compile).
octet::Tensor ReadInitializer(const OrtValueInfo* info) {
  const OrtValue* value = nullptr;
  Check(g_ort->ValueInfo_GetInitializerValue(info, &value));
  OCTET_CHECK(value != nullptr, "an initializer has no value");
  const TensorParts t = PartsOf(value);
  OCTET_CHECK(SupportedBoundaryType(t.dtype), "initializer of type ", octet::DTypeName(t.dtype));
  return octet::Tensor::View(t.dtype, t.shape, const_cast<void*>(t.data));
}

octet::Attribute ReadAttribute(const OrtOpAttr* attr, OrtOpAttrType type) {
  octet::Attribute a;
  size_t bytes = 0;
  auto read_size = [&] {
    // A first call with no room reports the size (and fails, which is expected).
    OrtStatus* s = g_ort->ReadOpAttr(attr, type, nullptr, 0, &bytes);
    if (s) g_ort->ReleaseStatus(s);
  };
  switch (type) {
    case ORT_OP_ATTR_INT:
      a.kind = octet::Attribute::Kind::kInt;
      Check(g_ort->ReadOpAttr(attr, type, &a.i, sizeof(a.i), &bytes));
      break;
    case ORT_OP_ATTR_FLOAT:
      a.kind = octet::Attribute::Kind::kFloat;
      Check(g_ort->ReadOpAttr(attr, type, &a.f, sizeof(a.f), &bytes));
      break;
    case ORT_OP_ATTR_INTS:
      a.kind = octet::Attribute::Kind::kInts;
      read_size();
      a.ints.resize(bytes / sizeof(int64_t));
      if (bytes) Check(g_ort->ReadOpAttr(attr, type, a.ints.data(), bytes, &bytes));
      break;
    case ORT_OP_ATTR_FLOATS:
      a.kind = octet::Attribute::Kind::kFloats;
      read_size();
      a.floats.resize(bytes / sizeof(float));
      if (bytes) Check(g_ort->ReadOpAttr(attr, type, a.floats.data(), bytes, &bytes));
      break;
    case ORT_OP_ATTR_STRING: {
      a.kind = octet::Attribute::Kind::kString;
      read_size();
      std::vector<char> chars(bytes + 1, '\0');
      if (bytes) Check(g_ort->ReadOpAttr(attr, type, chars.data(), bytes, &bytes));
      a.s = std::string(chars.data());
      break;
    }
    case ORT_OP_ATTR_STRINGS: {
      a.kind = octet::Attribute::Kind::kStrings;
      read_size();
      std::vector<char> chars(bytes, '\0');
      if (bytes) Check(g_ort->ReadOpAttr(attr, type, chars.data(), bytes, &bytes));
      for (size_t at = 0; at < chars.size();) {  // each string ends with '\0'
        const size_t len = strnlen(chars.data() + at, chars.size() - at);
        a.strings.emplace_back(chars.data() + at, len);
        at += len + 1;
      }
      break;
    }
    case ORT_OP_ATTR_TENSOR: {
      a.kind = octet::Attribute::Kind::kTensor;
      OrtValue* value = nullptr;
      Check(g_ort->OpAttr_GetTensorAttributeAsOrtValue(attr, &value));
      OCTET_CHECK(value != nullptr, "a tensor attribute has no value");
      TensorParts t;
      try {
        t = PartsOf(value);
      } catch (...) {
        g_ort->ReleaseValue(value);
        throw;
      }
      if (SupportedBoundaryType(t.dtype)) {
        a.t = octet::Tensor::Uninitialized(t.dtype, t.shape);
        if (a.t.nbytes()) std::memcpy(a.t.raw(), t.data, a.t.nbytes());
      } else {
        a.kind = octet::Attribute::Kind::kOther;
      }
      g_ort->ReleaseValue(value);
      break;
    }
    default:
      a.kind = octet::Attribute::Kind::kOther;  // graphs: octet runs no node that has one
  }
  return a;
}

std::string ValueName(const OrtValueInfo* info) {
  const char* name = nullptr;
  Check(g_ort->GetValueInfoName(info, &name));
  return name ? name : "";
}

std::vector<const OrtValueInfo*> NodeValues(const OrtNode* node, bool inputs) {
  size_t count = 0;
  Check(inputs ? g_ort->Node_GetNumInputs(node, &count) : g_ort->Node_GetNumOutputs(node, &count));
  std::vector<const OrtValueInfo*> values(count, nullptr);
  if (count)
    Check(inputs ? g_ort->Node_GetInputs(node, values.data(), count)
                 : g_ort->Node_GetOutputs(node, values.data(), count));
  return values;
}

std::vector<const OrtValueInfo*> GraphValues(const OrtGraph* graph, int which) {
  size_t count = 0;
  if (which == 0) Check(g_ort->Graph_GetNumInputs(graph, &count));
  if (which == 1) Check(g_ort->Graph_GetNumOutputs(graph, &count));
  if (which == 2) Check(g_ort->Graph_GetNumInitializers(graph, &count));
  std::vector<const OrtValueInfo*> values(count, nullptr);
  if (count == 0) return values;
  if (which == 0) Check(g_ort->Graph_GetInputs(graph, values.data(), count));
  if (which == 1) Check(g_ort->Graph_GetOutputs(graph, values.data(), count));
  if (which == 2) Check(g_ort->Graph_GetInitializers(graph, values.data(), count));
  return values;
}

struct ConvertedGraph;
void SortNodes(ConvertedGraph& c);

struct ConvertedGraph {
  octet::Graph graph;
  std::vector<const OrtNode*> nodes;  // graph.nodes[i] came from nodes[i]
  // Per node: it touches a value octet cannot exchange with ORT (4-bit, string,
  // non-tensor) or has a subgraph; such a node is never claimed.
  std::vector<bool> foreign;
};

// ORT's graph as octet's IR; constant initializers are views of ORT's (ReadInitializer).
ConvertedGraph Convert(const OrtGraph* ort_graph) {
  ConvertedGraph out;
  octet::Graph& g = out.graph;

  size_t num_opsets = 0;
  Check(g_ort->Graph_GetNumOperatorSets(ort_graph, &num_opsets));
  std::vector<const char*> domains(num_opsets, nullptr);
  std::vector<int64_t> versions(num_opsets, 0);
  if (num_opsets)
    Check(g_ort->Graph_GetOperatorSets(ort_graph, domains.data(), versions.data(), num_opsets));
  for (size_t i = 0; i < num_opsets; ++i)
    g.opset_imports[octet::NormalizeDomain(domains[i] ? domains[i] : "")] =
        static_cast<int>(versions[i]);

  std::map<std::string, bool> type_ok;  // value name -> exchangeable with ORT
  auto value_id = [&](const OrtValueInfo* info) -> int {
    if (info == nullptr) return -1;
    const std::string name = ValueName(info);
    if (name.empty()) return -1;
    const int existing = g.FindValue(name);
    if (existing >= 0) return existing;
    const int id = g.AddValue(name);
    const TypeAndShape ts = ReadTypeInfo(info);
    g.values[id].dtype = ts.is_tensor ? ts.dtype : octet::DType::kUndefined;
    g.values[id].shape = ts.shape;
    type_ok[name] = ts.is_tensor && SupportedBoundaryType(ts.dtype);
    return id;
  };

  // Constant initializers first, so that values read as constants know it.
  for (const OrtValueInfo* info : GraphValues(ort_graph, 2)) {
    bool constant = false;
    Check(g_ort->ValueInfo_IsConstantInitializer(info, &constant));
    const int id = value_id(info);
    if (!constant || id < 0 || !type_ok[g.values[id].name]) continue;
    g.SetInitializer(id, ReadInitializer(info));
  }
  for (const OrtValueInfo* info : GraphValues(ort_graph, 0)) {
    const int id = value_id(info);
    if (id >= 0 && !g.values[id].initializer) g.inputs.push_back(id);
  }

  size_t num_nodes = 0;
  Check(g_ort->Graph_GetNumNodes(ort_graph, &num_nodes));
  out.nodes.resize(num_nodes);
  if (num_nodes) Check(g_ort->Graph_GetNodes(ort_graph, out.nodes.data(), num_nodes));  // sorted
  for (const OrtNode* ort_node : out.nodes) {
    octet::Node node;
    const char* text = nullptr;
    Check(g_ort->Node_GetName(ort_node, &text));
    node.name = text ? text : "";
    Check(g_ort->Node_GetOperatorType(ort_node, &text));
    node.op_type = text ? text : "";
    Check(g_ort->Node_GetDomain(ort_node, &text));
    node.domain = octet::NormalizeDomain(text ? text : "");
    auto opset = g.opset_imports.find(node.domain);
    if (opset != g.opset_imports.end()) {
      node.opset = opset->second;
    } else {
      int since = 0;
      Check(g_ort->Node_GetSinceVersion(ort_node, &since));
      node.opset = since;
    }
    bool foreign = false;
    for (const OrtValueInfo* info : NodeValues(ort_node, true)) {
      const int id = value_id(info);
      node.inputs.push_back(id);
      if (id >= 0 && !type_ok[g.values[id].name]) foreign = true;
    }
    for (const OrtValueInfo* info : NodeValues(ort_node, false)) {
      const int id = value_id(info);
      node.outputs.push_back(id);
      if (id >= 0 && !type_ok[g.values[id].name]) foreign = true;
    }
    const char* assigned = nullptr;  // a node another EP already took
    Check(g_ort->Node_GetEpName(ort_node, &assigned));
    if (assigned != nullptr && assigned[0] != '\0') foreign = true;
    size_t num_subgraphs = 0;
    Check(g_ort->Node_GetNumSubgraphs(ort_node, &num_subgraphs));
    size_t num_implicit = 0;
    Check(g_ort->Node_GetNumImplicitInputs(ort_node, &num_implicit));
    if (num_subgraphs || num_implicit) foreign = true;
    size_t num_attrs = 0;
    Check(g_ort->Node_GetNumAttributes(ort_node, &num_attrs));
    std::vector<const OrtOpAttr*> attrs(num_attrs, nullptr);
    if (num_attrs) Check(g_ort->Node_GetAttributes(ort_node, attrs.data(), num_attrs));
    for (const OrtOpAttr* attr : attrs) {
      const char* attr_name = nullptr;
      Check(g_ort->OpAttr_GetName(attr, &attr_name));
      OrtOpAttrType type = ORT_OP_ATTR_UNDEFINED;
      Check(g_ort->OpAttr_GetType(attr, &type));
      octet::Attribute a = ReadAttribute(attr, type);
      if (a.kind == octet::Attribute::Kind::kOther) foreign = true;
      node.attributes[attr_name ? attr_name : ""] = std::move(a);
    }
    out.foreign.push_back(foreign);
    const int index = static_cast<int>(g.nodes.size());
    for (int v : node.outputs)
      if (v >= 0) g.values[v].producer = index;
    g.nodes.push_back(std::move(node));
  }
  for (const OrtValueInfo* info : GraphValues(ort_graph, 1)) {
    const int id = value_id(info);
    if (id >= 0) g.outputs.push_back(id);
  }
  SortNodes(out);
  return out;
}

// Orders the nodes producers first (ORT's order for a subgraph it compiles is not always
// one), keeping ORT's order among independent nodes; `nodes` and `foreign` follow.
void SortNodes(ConvertedGraph& c) {
  octet::Graph& g = c.graph;
  const size_t n = g.nodes.size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> consumers(n);
  for (size_t i = 0; i < n; ++i)
    for (int in : g.nodes[i].inputs) {
      if (in < 0) continue;
      const int p = g.values[in].producer;
      if (p < 0 || p == static_cast<int>(i)) continue;
      ++pending[i];
      consumers[p].push_back(static_cast<int>(i));
    }
  std::set<int> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.insert(static_cast<int>(i));
  std::vector<int> order;
  while (!ready.empty()) {
    const int i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (int c2 : consumers[i])
      if (--pending[c2] == 0) ready.insert(c2);
  }
  OCTET_CHECK(order.size() == n, "the graph has a cycle");
  bool sorted = true;
  for (size_t i = 0; i < n; ++i) sorted = sorted && order[i] == static_cast<int>(i);
  if (sorted) return;
  std::vector<octet::Node> nodes;
  std::vector<const OrtNode*> ort_nodes;
  std::vector<bool> foreign;
  for (int i : order) {
    nodes.push_back(std::move(g.nodes[i]));
    ort_nodes.push_back(c.nodes[i]);
    foreign.push_back(c.foreign[i]);
  }
  g.nodes = std::move(nodes);
  c.nodes = std::move(ort_nodes);
  c.foreign = std::move(foreign);
  for (size_t i = 0; i < n; ++i)
    for (int v : g.nodes[i].outputs)
      if (v >= 0) g.values[v].producer = static_cast<int>(i);
}

// ---- Compiled pieces -------------------------------------------------------------------

struct Piece {
  std::unique_ptr<octet::InferenceSession> session;
  std::vector<std::string> input_names;   // the fused node's inputs, in ORT's order
  std::vector<std::string> output_names;  // the fused node's outputs, in ORT's order
  std::vector<bool> read_in_place;        // per input: octet may read ORT's buffer as it is
  std::vector<octet::DType> input_types;
};

// Whether ORT's buffer can be read where it lies by kernels that read to the end of the
// 64-byte line after a tensor's last byte (counted from its start) and expect zeros there
// (core/tensor.cc): those bytes must be in the last byte's page (mapped) and zero. The
// same test as the Python binding's (python/octet_module.cc).
bool ZeroPaddedInPage(const void* data, size_t nbytes, size_t element_size) {
  const auto begin = reinterpret_cast<uintptr_t>(data);
  if (nbytes == 0 || begin % element_size != 0) return false;
  const uintptr_t end = begin + nbytes, padded_end = begin + (nbytes + 63) / 64 * 64 + 64;
  static const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  if ((end - 1) / page != (padded_end - 1) / page) return false;
  const auto* tail = reinterpret_cast<const volatile unsigned char*>(end);
  for (uintptr_t i = 0; i < padded_end - end; ++i)
    if (tail[i] != 0) return false;
  return true;
}

octet::Tensor FeedFrom(const OrtValue* value, octet::DType expected, bool in_place,
                       const std::string& name) {
  const TensorParts parts = PartsOf(value);
  const octet::DType dtype = parts.dtype;
  OCTET_CHECK(dtype == expected, "input '", name, "' is ", octet::DTypeName(dtype), ", expected ",
              octet::DTypeName(expected));
  const void* data = parts.data;
  const octet::Shape& shape = parts.shape;
  octet::Tensor t = octet::Tensor::View(dtype, shape, const_cast<void*>(data));
  if (in_place || ZeroPaddedInPage(data, t.nbytes(), octet::DTypeSize(dtype))) return t;
  octet::Tensor copy = octet::Tensor::Uninitialized(dtype, shape);
  if (copy.nbytes()) std::memcpy(copy.raw(), data, copy.nbytes());
  return copy;
}

struct ComputeInfo : OrtNodeComputeInfo {
  std::unique_ptr<Piece> piece;

  explicit ComputeInfo(std::unique_ptr<Piece> p) : OrtNodeComputeInfo{}, piece(std::move(p)) {
    ort_version_supported = ORT_API_VERSION;
    CreateState = CreateStateImpl;
    Compute = ComputeImpl;
    ReleaseState = ReleaseStateImpl;
  }

  static OrtStatus* ORT_API_CALL CreateStateImpl(OrtNodeComputeInfo* this_ptr,
                                                 OrtNodeComputeContext*, void** state) noexcept {
    *state = static_cast<ComputeInfo*>(this_ptr)->piece.get();
    return nullptr;
  }

  static OrtStatus* ORT_API_CALL ComputeImpl(OrtNodeComputeInfo*, void* state,
                                             OrtKernelContext* context) noexcept {
    try {
      Piece& p = *static_cast<Piece*>(state);
      size_t num_inputs = 0, num_outputs = 0;
      Check(g_ort->KernelContext_GetInputCount(context, &num_inputs));
      Check(g_ort->KernelContext_GetOutputCount(context, &num_outputs));
      OCTET_CHECK(num_inputs == p.input_names.size() && num_outputs == p.output_names.size(),
                  "the fused node has ", num_inputs, " inputs and ", num_outputs,
                  " outputs; compiled for ", p.input_names.size(), " and ", p.output_names.size());
      std::vector<std::pair<std::string, octet::Tensor>> feeds;
      feeds.reserve(num_inputs);
      for (size_t i = 0; i < num_inputs; ++i) {
        const OrtValue* value = nullptr;
        Check(g_ort->KernelContext_GetInput(context, i, &value));
        OCTET_CHECK(value != nullptr, "input '", p.input_names[i], "' is missing");
        feeds.emplace_back(p.input_names[i],
                           FeedFrom(value, p.input_types[i], p.read_in_place[i], p.input_names[i]));
      }
      std::vector<octet::Tensor> results = p.session->Run(feeds, p.output_names);
      for (size_t j = 0; j < num_outputs; ++j) {
        const octet::Tensor& t = results[j];
        std::vector<int64_t> dims(t.shape().begin(), t.shape().end());
        OrtValue* out = nullptr;
        Check(g_ort->KernelContext_GetOutput(context, j, dims.data(), dims.size(), &out));
        void* data = nullptr;
        Check(g_ort->GetTensorMutableData(out, &data));
        if (t.nbytes()) std::memcpy(data, t.raw(), t.nbytes());
      }
      return nullptr;
    } catch (const std::exception& e) {
      return StatusFrom(e);
    }
  }

  static void ORT_API_CALL ReleaseStateImpl(OrtNodeComputeInfo*, void*) noexcept {}
};

// ---- The EP ----------------------------------------------------------------------------

struct Factory;

struct Ep : OrtEp {
  Factory& factory;
  Options options;
  const OrtLogger* logger;

  Ep(Factory& f, const Options& o, const OrtLogger* l)
      : OrtEp{}, factory(f), options(o), logger(l) {
    ort_version_supported = ORT_API_VERSION;
    GetName = GetNameImpl;
    GetCapability = GetCapabilityImpl;
    Compile = CompileImpl;
    ReleaseNodeComputeInfos = ReleaseNodeComputeInfosImpl;
  }

  static const char* ORT_API_CALL GetNameImpl(const OrtEp*) noexcept { return kEpName; }

  static OrtStatus* ORT_API_CALL GetCapabilityImpl(OrtEp* this_ptr, const OrtGraph* graph,
                                                   OrtEpGraphSupportInfo* support) noexcept {
    Ep& ep = *static_cast<Ep*>(this_ptr);
    try {
      // A subgraph of an If / Loop / Scan reads values of its parent's scope: octet takes
      // nothing there (it runs no node that has a subgraph either).
      const OrtNode* parent = nullptr;
      Check(g_ort->Graph_GetParentNode(graph, &parent));
      if (parent != nullptr) return nullptr;
      ConvertedGraph converted = Convert(graph);
      octet::ClaimOptions claim;
      claim.session = SessionOptionsFor(ep.options);
      claim.regions = ep.options.regions;
      claim.excluded = converted.foreign;
      const octet::ClaimPlan plan = octet::PlanClaims(converted.graph, claim);
      OrtNodeFusionOptions fusion{};
      fusion.ort_version_supported = ORT_API_VERSION;
      fusion.drop_constant_initializers = true;  // octet keeps its own copy (Compile)
      for (const std::vector<int>& piece : plan.pieces) {
        std::vector<const OrtNode*> nodes;
        for (int i : piece) nodes.push_back(converted.nodes[i]);
        Check(
            g_ep->EpGraphSupportInfo_AddNodesToFuse(support, nodes.data(), nodes.size(), &fusion));
      }
      if (ep.options.debug) {
        std::istringstream lines(plan.report);
        for (std::string line; std::getline(lines, line);)
          if (line.rfind("qdq_refused", 0) == 0 || line.rfind("qdq_groups", 0) == 0)
            Log(ep.logger, ORT_LOGGING_LEVEL_WARNING, line);
        std::map<std::string, int> unclaimed;
        for (size_t i = 0; i < plan.unclaimed_why.size(); ++i) {
          if (plan.unclaimed_why[i].empty()) continue;
          std::string why = plan.unclaimed_why[i];
          why = why.substr(0, why.find(':'));
          ++unclaimed["unclaimed why=" + why + " op=" + converted.graph.nodes[i].op_type];
        }
        for (const auto& [what, count] : unclaimed)
          Log(ep.logger, ORT_LOGGING_LEVEL_WARNING, what + " count=" + std::to_string(count));
        Log(ep.logger, ORT_LOGGING_LEVEL_WARNING,
            "claimed=" + std::to_string(plan.claimed_nodes) +
                " groups=" + std::to_string(plan.int8_nodes) +
                " subgraphs=" + std::to_string(plan.pieces.size()) +
                " nodes=" + std::to_string(converted.graph.nodes.size()));
      }
      return nullptr;
    } catch (const std::exception& e) {
      return StatusFrom(e);
    }
  }

  static OrtStatus* ORT_API_CALL CompileImpl(OrtEp* this_ptr, const OrtGraph** graphs,
                                             const OrtNode** fused_nodes, size_t count,
                                             OrtNodeComputeInfo** infos,
                                             OrtNode** /*ep_context_nodes*/) noexcept {
    Ep& ep = *static_cast<Ep*>(this_ptr);
    for (size_t i = 0; i < count; ++i) infos[i] = nullptr;
    try {
      for (size_t i = 0; i < count; ++i) {
        auto piece = std::make_unique<Piece>();
        ConvertedGraph converted = Convert(graphs[i]);
        for (const OrtValueInfo* info : NodeValues(fused_nodes[i], true))
          piece->input_names.push_back(info ? ValueName(info) : "");
        for (const OrtValueInfo* info : NodeValues(fused_nodes[i], false))
          piece->output_names.push_back(info ? ValueName(info) : "");
        // The octet graph's inputs and outputs are the fused node's, in its order.
        octet::Graph& g = converted.graph;
        g.inputs.clear();
        for (const std::string& name : piece->input_names) {
          const int id = g.FindValue(name);
          OCTET_CHECK(id >= 0 && !g.values[id].initializer, "fused node input '", name,
                      "' is not an input of its subgraph");
          g.inputs.push_back(id);
          piece->input_types.push_back(g.values[id].dtype);
        }
        g.outputs.clear();
        for (const std::string& name : piece->output_names) {
          const int id = g.FindValue(name);
          OCTET_CHECK(id >= 0, "fused node output '", name, "' is not in its subgraph");
          g.outputs.push_back(id);
        }
        octet::SessionOptions session_options = SessionOptionsFor(ep.options);
        session_options.borrowed_initializers = true;
        piece->session = octet::InferenceSession::FromGraph(std::move(g), session_options);
        for (const octet::TensorInfo& info : piece->session->inputs())
          piece->read_in_place.push_back(info.reads_only_own_bytes);
        infos[i] = new ComputeInfo(std::move(piece));
      }
      return nullptr;
    } catch (const std::exception& e) {
      for (size_t i = 0; i < count; ++i) {
        delete static_cast<ComputeInfo*>(infos[i]);
        infos[i] = nullptr;
      }
      return StatusFrom(e);
    }
  }

  static void ORT_API_CALL ReleaseNodeComputeInfosImpl(OrtEp*, OrtNodeComputeInfo** infos,
                                                       size_t count) noexcept {
    for (size_t i = 0; i < count; ++i) delete static_cast<ComputeInfo*>(infos[i]);
  }
};

// ---- The factory -----------------------------------------------------------------------

struct Factory : OrtEpFactory {
  std::string registration_name;
  const OrtLogger* default_logger;

  Factory(const char* name, const OrtLogger* logger)
      : OrtEpFactory{}, registration_name(name ? name : ""), default_logger(logger) {
    // Every member up to ORT_API_VERSION (23) is set: ORT 1.23+ calls them without
    // checking for null.
    ort_version_supported = ORT_API_VERSION;
    GetName = GetNameImpl;
    GetVendor = GetVendorImpl;
    GetSupportedDevices = GetSupportedDevicesImpl;
    CreateEp = CreateEpImpl;
    ReleaseEp = ReleaseEpImpl;
    GetVendorId = GetVendorIdImpl;
    GetVersion = GetVersionImpl;
    ValidateCompiledModelCompatibilityInfo = ValidateCompiledModelCompatibilityInfoImpl;
    CreateAllocator = CreateAllocatorImpl;
    ReleaseAllocator = ReleaseAllocatorImpl;
    CreateDataTransfer = CreateDataTransferImpl;
    IsStreamAware = IsStreamAwareImpl;
    CreateSyncStreamForDevice = CreateSyncStreamForDeviceImpl;
  }

  static const char* ORT_API_CALL GetNameImpl(const OrtEpFactory*) noexcept { return kEpName; }
  static const char* ORT_API_CALL GetVendorImpl(const OrtEpFactory*) noexcept { return kVendor; }
  static uint32_t ORT_API_CALL GetVendorIdImpl(const OrtEpFactory*) noexcept { return 0; }
  static const char* ORT_API_CALL GetVersionImpl(const OrtEpFactory*) noexcept {
    return OCTET_VERSION_STRING;
  }

  static OrtStatus* ORT_API_CALL GetSupportedDevicesImpl(
      OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices, size_t num_devices,
      OrtEpDevice** ep_devices, size_t max_ep_devices, size_t* num_ep_devices) noexcept {
    *num_ep_devices = 0;
    try {
      for (size_t i = 0; i < num_devices && *num_ep_devices < max_ep_devices; ++i) {
        if (g_ort->HardwareDevice_Type(devices[i]) != OrtHardwareDeviceType_CPU) continue;
        OrtKeyValuePairs* metadata = nullptr;
        g_ort->CreateKeyValuePairs(&metadata);
        g_ort->AddKeyValuePair(metadata, "octet_version", OCTET_VERSION_STRING);
        g_ort->AddKeyValuePair(metadata, "isa", octet::ActiveIsaName().c_str());
        g_ort->AddKeyValuePair(metadata, "ort_headers", OCTET_ORT_HEADERS_VERSION);
        OrtEpDevice* device = nullptr;
        OrtStatus* status = g_ep->CreateEpDevice(this_ptr, devices[i], metadata, nullptr, &device);
        g_ort->ReleaseKeyValuePairs(metadata);
        if (status) return status;
        ep_devices[(*num_ep_devices)++] = device;
        break;  // one device: the CPU
      }
      return nullptr;
    } catch (const std::exception& e) {
      return StatusFrom(e);
    }
  }

  static OrtStatus* ORT_API_CALL CreateEpImpl(OrtEpFactory* this_ptr,
                                              const OrtHardwareDevice* const*,
                                              const OrtKeyValuePairs* const*, size_t,
                                              const OrtSessionOptions* session_options,
                                              const OrtLogger* logger, OrtEp** ep) noexcept {
    *ep = nullptr;
    try {
      const Options options = ReadOptions(session_options);
      *ep = new Ep(*static_cast<Factory*>(this_ptr), options, logger);
      return nullptr;
    } catch (const std::exception& e) {
      return g_ort->CreateStatus(ORT_INVALID_ARGUMENT, e.what());
    }
  }

  static void ORT_API_CALL ReleaseEpImpl(OrtEpFactory*, OrtEp* ep) noexcept {
    delete static_cast<Ep*>(ep);
  }

  static OrtStatus* ORT_API_CALL ValidateCompiledModelCompatibilityInfoImpl(
      OrtEpFactory*, const OrtHardwareDevice* const*, size_t, const char*,
      OrtCompiledModelCompatibility* compatibility) noexcept {
    *compatibility = OrtCompiledModelCompatibility_EP_NOT_APPLICABLE;  // no EPContext models
    return nullptr;
  }

  static OrtStatus* ORT_API_CALL CreateAllocatorImpl(OrtEpFactory*, const OrtMemoryInfo*,
                                                     const OrtKeyValuePairs*,
                                                     OrtAllocator** allocator) noexcept {
    *allocator = nullptr;  // ORT's CPU allocator
    return nullptr;
  }

  static void ORT_API_CALL ReleaseAllocatorImpl(OrtEpFactory*, OrtAllocator*) noexcept {}

  static OrtStatus* ORT_API_CALL CreateDataTransferImpl(OrtEpFactory*,
                                                        OrtDataTransferImpl** transfer) noexcept {
    *transfer = nullptr;  // CPU memory only
    return nullptr;
  }

  static bool ORT_API_CALL IsStreamAwareImpl(const OrtEpFactory*) noexcept { return false; }

  static OrtStatus* ORT_API_CALL
  CreateSyncStreamForDeviceImpl(OrtEpFactory*, const OrtMemoryDevice*, const OrtKeyValuePairs*,
                                OrtSyncStreamImpl** stream) noexcept {
    *stream = nullptr;
    return nullptr;
  }
};

}  // namespace octet_ep

extern "C" {

__attribute__((visibility("default"))) OrtStatus* CreateEpFactories(
    const char* registered_name, const OrtApiBase* ort_api_base, const OrtLogger* default_logger,
    OrtEpFactory** factories, size_t max_factories, size_t* num_factories) {
  using namespace octet_ep;
  *num_factories = 0;
  const OrtApi* api = ort_api_base->GetApi(ORT_API_VERSION);
  if (api == nullptr) return nullptr;  // an ORT older than these headers: nothing offered
  g_ort = api;
  g_ep = api->GetEpApi();
  if (max_factories < 1)
    return g_ort->CreateStatus(ORT_INVALID_ARGUMENT, "octet: no room for the EP factory");
  try {
    factories[0] = new Factory(registered_name, default_logger);
    *num_factories = 1;
    return nullptr;
  } catch (const std::exception& e) {
    return StatusFrom(e);
  }
}

__attribute__((visibility("default"))) OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
  delete static_cast<octet_ep::Factory*>(factory);
  return nullptr;
}

}  // extern "C"
