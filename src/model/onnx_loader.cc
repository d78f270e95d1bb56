#include "model/onnx_loader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "core/memory_limit.h"
#include "core/utf8.h"
#include "graph/octet_ops.h"
#include "onnx.pb.h"

namespace octet {
namespace {

namespace fs = std::filesystem;

// raw_data and external data are little-endian; the loader copies them as they are.
static_assert(std::endian::native == std::endian::little, "octet assumes a little-endian host");

// IR 3 is the first with opset imports per domain; 14 is what onnx 1.23.2 writes.
constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxIrVersion = 14;

// DTypeName covers the types octet's enum knows; newer ONNX types are named from the schema.
std::string TypeName(int32_t data_type) {
  if (data_type >= 0 && data_type <= static_cast<int32_t>(DType::kFloat4E2M1))
    return DTypeName(static_cast<DType>(data_type));
  if (onnx::TensorProto_DataType_IsValid(data_type)) {
    std::string name = onnx::TensorProto_DataType_Name(data_type);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return name;
  }
  return "undefined(" + std::to_string(data_type) + ")";
}

bool Is4Bit(DType t) { return t == DType::kInt4 || t == DType::kUInt4; }

// Bytes the ONNX serialization of `numel` elements occupies (4-bit types packed two per byte).
size_t SerializedBytes(DType dtype, int64_t numel, const std::string& what) {
  if (Is4Bit(dtype)) return static_cast<size_t>(numel / 2 + numel % 2);
  const size_t elem = DTypeSize(dtype);
  OCTET_CHECK(static_cast<uint64_t>(numel) <= std::numeric_limits<size_t>::max() / elem, what,
              ": tensor is too large");
  return static_cast<size_t>(numel) * elem;
}

// Copies little-endian serialized bytes (raw_data or an external file) into t; the
// caller has checked that their size matches t.
void CopySerialized(const std::string& bytes, Tensor& t, const std::string& what) {
  const size_t size = bytes.size();
  const auto* src = reinterpret_cast<const uint8_t*>(bytes.data());
  if (Is4Bit(t.dtype())) {
    Unpack4Bit(src, t.numel(), t.dtype() == DType::kInt4, static_cast<uint8_t*>(t.raw()));
    return;
  }
  if (t.dtype() == DType::kBool)
    for (size_t i = 0; i < size; ++i)
      OCTET_CHECK(src[i] <= 1, what, ": bool element ", i, " has byte value ", int{src[i]},
                  " (must be 0 or 1)");
  if (size) std::memcpy(t.raw(), src, size);
}

// int32_data holds one element per entry for 8- and 16-bit types, in [lo, hi].
template <typename T>
void NarrowInt32Data(const google::protobuf::RepeatedField<int32_t>& field, int64_t lo, int64_t hi,
                     Tensor& t, const std::string& what) {
  T* out = static_cast<T*>(t.raw());
  for (int i = 0; i < field.size(); ++i) {
    const int32_t v = field.Get(i);
    OCTET_CHECK(v >= lo && v <= hi, what, ": int32_data[", i, "] = ", v, " is outside [", lo, ", ",
                hi, "] for ", DTypeName(t.dtype()));
    out[i] = static_cast<T>(v);
  }
}

template <typename Field>
void CopyField(const Field& field, Tensor& t) {
  if (field.size()) std::memcpy(t.raw(), field.data(), t.nbytes());
}

// The typed *_data field onnx.proto assigns to a data type, and its entry count.
struct TypedField {
  const char* name;
  int size;
};
TypedField TypedFieldFor(const onnx::TensorProto& proto, DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return {"float_data", proto.float_data_size()};
    case DType::kFloat64:
      return {"double_data", proto.double_data_size()};
    case DType::kInt64:
      return {"int64_data", proto.int64_data_size()};
    case DType::kUInt32:
    case DType::kUInt64:
      return {"uint64_data", proto.uint64_data_size()};
    default:
      return {"int32_data", proto.int32_data_size()};
  }
}

// Copies the typed field into t; the caller has checked its entry count.
void CopyTypedField(const onnx::TensorProto& proto, Tensor& t, const std::string& what) {
  const auto& i32 = proto.int32_data();
  switch (t.dtype()) {
    case DType::kFloat32:
      return CopyField(proto.float_data(), t);
    case DType::kFloat64:
      return CopyField(proto.double_data(), t);
    case DType::kInt64:
      return CopyField(proto.int64_data(), t);
    case DType::kInt32:
      return CopyField(i32, t);
    case DType::kUInt64:
      return CopyField(proto.uint64_data(), t);
    case DType::kUInt32: {
      const auto& u64 = proto.uint64_data();
      uint32_t* out = t.data<uint32_t>();
      for (int i = 0; i < u64.size(); ++i) {
        OCTET_CHECK(u64.Get(i) <= std::numeric_limits<uint32_t>::max(), what, ": uint64_data[", i,
                    "] = ", u64.Get(i), " is outside the uint32 range");
        out[i] = static_cast<uint32_t>(u64.Get(i));
      }
      return;
    }
    case DType::kInt8:
      return NarrowInt32Data<int8_t>(i32, -128, 127, t, what);
    case DType::kUInt8:
      return NarrowInt32Data<uint8_t>(i32, 0, 255, t, what);
    case DType::kInt16:
      return NarrowInt32Data<int16_t>(i32, -32768, 32767, t, what);
    case DType::kUInt16:
      return NarrowInt32Data<uint16_t>(i32, 0, 65535, t, what);
    case DType::kBool:
      return NarrowInt32Data<uint8_t>(i32, 0, 1, t, what);
    // Bit patterns: writers use the unsigned view; the signed view is the same bits.
    case DType::kFloat16:
    case DType::kBFloat16:
      return NarrowInt32Data<uint16_t>(i32, -32768, 65535, t, what);
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
      return NarrowInt32Data<uint8_t>(i32, -128, 255, t, what);
    case DType::kInt4:
    case DType::kUInt4: {
      // Each int32_data entry is one packed byte (two elements).
      std::vector<uint8_t> packed(i32.size());
      for (int i = 0; i < i32.size(); ++i) {
        OCTET_CHECK(i32.Get(i) >= -128 && i32.Get(i) <= 255, what, ": int32_data[", i,
                    "] = ", i32.Get(i), " is not a packed byte of two 4-bit elements");
        packed[i] = static_cast<uint8_t>(i32.Get(i));
      }
      Unpack4Bit(packed.data(), t.numel(), t.dtype() == DType::kInt4,
                 static_cast<uint8_t*>(t.raw()));
      return;
    }
    default:
      Fail(what, ": no typed data field for ", DTypeName(t.dtype()));
  }
}

// A non-negative integer written as a decimal string (external_data offset/length).
int64_t ParseByteCount(const std::string& text, const char* key, const std::string& what) {
  bool ok = !text.empty() && text.size() <= 18;  // 18 digits cannot overflow int64
  for (char c : text) ok = ok && c >= '0' && c <= '9';
  OCTET_CHECK(ok, what, ": external data '", key, "' is '", text, "', not a byte count");
  return std::stoll(text);
}

bool IsInsideFolder(const fs::path& path, const fs::path& folder) {
  auto [folder_end, path_it] =
      std::mismatch(folder.begin(), folder.end(), path.begin(), path.end());
  return folder_end == folder.end() && path_it != path.end();
}

// Where the `expected_bytes` an EXTERNAL tensor points to lie (a missing length means
// exactly those), checked to be inside the file. The location must stay inside the
// model's folder, also after resolving symlinks, so a model cannot make octet read
// arbitrary files.
struct ExternalBytes {
  fs::path file;
  std::string location;  // as the model names it, for messages
  int64_t offset;
};
ExternalBytes LocateExternalData(const onnx::TensorProto& proto, const std::string& base_dir,
                                 size_t expected_bytes, const std::string& what) {
  OCTET_CHECK(!base_dir.empty(), what,
              ": uses external data, which needs the model's folder (load the model from its "
              "file, or pass base_dir)");
  std::string location;
  int64_t offset = 0;
  std::optional<int64_t> length;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offset = ParseByteCount(entry.value(), "offset", what);
    else if (entry.key() == "length")
      length = ParseByteCount(entry.value(), "length", what);
    // "checksum" and unknown keys do not change what is read.
  }
  OCTET_CHECK(!location.empty(), what, ": external data has no 'location'");
  OCTET_CHECK(!length || static_cast<uint64_t>(*length) == expected_bytes, what,
              ": external data length is ", *length, " bytes but ",
              DTypeName(static_cast<DType>(proto.data_type())), " ",
              ShapeToString(Shape(proto.dims().begin(), proto.dims().end())), " needs ",
              expected_bytes);
  OCTET_CHECK(location.find('\0') == std::string::npos, what,
              ": external data location contains a NUL character");
  const fs::path relative(location);
  OCTET_CHECK(relative.is_relative(), what, ": external data location '", location,
              "' is an absolute path; it must be relative to the model's folder");
  for (const fs::path& part : relative)
    OCTET_CHECK(part != "..", what, ": external data location '", location,
                "' contains '..'; it must stay inside the model's folder");

  std::error_code ec;
  fs::path folder = fs::weakly_canonical(fs::absolute(base_dir), ec);
  OCTET_CHECK(!ec, what, ": cannot resolve the model folder '", base_dir, "': ", ec.message());
  if (!folder.has_filename()) folder = folder.parent_path();  // drop a trailing '/'
  const fs::path file = fs::weakly_canonical(folder / relative, ec);
  OCTET_CHECK(!ec, what, ": cannot resolve external data location '", location,
              "': ", ec.message());
  OCTET_CHECK(IsInsideFolder(file, folder), what, ": external data location '", location,
              "' resolves to '", file.string(), "', outside the model's folder '", folder.string(),
              "'");
  OCTET_CHECK(fs::is_regular_file(file, ec), what, ": external data file '", location,
              "' does not exist in '", folder.string(), "'");
  const uintmax_t file_size = fs::file_size(file, ec);
  OCTET_CHECK(!ec, what, ": cannot read the size of external data file '", location,
              "': ", ec.message());
  OCTET_CHECK(static_cast<uintmax_t>(offset) <= file_size, what, ": external data offset ", offset,
              " is beyond the end of '", location, "' (", file_size, " bytes)");
  OCTET_CHECK(expected_bytes <= file_size - static_cast<uintmax_t>(offset), what,
              ": external data offset ", offset, " + length ", expected_bytes,
              " is beyond the end of '", location, "' (", file_size, " bytes)");

  return {file, location, offset};
}

std::string ReadExternalData(const ExternalBytes& at, size_t expected_bytes,
                             const std::string& what) {
  std::ifstream in(at.file, std::ios::binary);
  OCTET_CHECK(in, what, ": cannot open external data file '", at.location,
              "': ", std::strerror(errno));
  std::string bytes(expected_bytes, '\0');
  in.seekg(at.offset);
  in.read(bytes.data(), static_cast<std::streamsize>(expected_bytes));
  OCTET_CHECK(in && static_cast<size_t>(in.gcount()) == expected_bytes, what, ": failed to read ",
              expected_bytes, " bytes at offset ", at.offset, " of external data file '",
              at.location, "'");
  return bytes;
}

// External data of at least this many bytes, at an offset of a whole number of
// cache lines, is mapped from its file instead of read: its pages enter memory as
// they are touched (an embedding table a row per token), and a tensor that a kernel
// packs at session creation gives its pages back when it is released.
constexpr size_t kMappedExternalBytes = size_t{1} << 20;
constexpr int64_t kMappedExternalAlign = 64;

// A private, copy-on-write mapping of the bytes at.offset..+bytes, as a tensor's
// owner (unmapped when the last view goes) and where they start; null when the
// system refuses it, and the caller reads them instead.
std::shared_ptr<void> MapExternalData(const ExternalBytes& at, size_t bytes, void** data) {
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  if (page <= 0) return nullptr;
  const int64_t start = at.offset / page * page;
  const size_t length = bytes + static_cast<size_t>(at.offset - start);
  const int fd = ::open(at.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, start);
  ::close(fd);
  if (base == MAP_FAILED) return nullptr;
  *data = static_cast<uint8_t*>(base) + (at.offset - start);
  return std::shared_ptr<void>(base, [length](void* p) { ::munmap(p, length); });
}

Tensor TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir,
                       const std::string& what) {
  const int32_t data_type = proto.data_type();
  OCTET_CHECK(data_type > 0 && data_type <= static_cast<int32_t>(DType::kFloat4E2M1) &&
                  IsSupportedStorage(static_cast<DType>(data_type)),
              what, ": tensors of type ", TypeName(data_type), " are not supported");
  OCTET_CHECK(!proto.has_segment(), what, ": segmented tensors are not supported");
  const DType dtype = static_cast<DType>(data_type);
  const Shape shape(proto.dims().begin(), proto.dims().end());
  int64_t numel = 0;
  try {
    numel = NumElements(shape);
  } catch (const Error& e) {
    FailWithContext(e, what, ": ");
  }
  // Sizes are checked before anything is allocated (the tensor, an external file's bytes),
  // so a corrupted shape cannot request absurd memory: the data present must match the
  // shape, and the tensor must fit the size limit (core/memory_limit.h).
  const size_t expected_bytes = SerializedBytes(dtype, numel, what);
  auto check_limit = [&] {
    try {
      CheckedTensorBytes(dtype, shape);
    } catch (const Error& e) {
      FailWithContext(e, what, ": ");
    }
  };

  const bool external = proto.data_location() == onnx::TensorProto_DataLocation_EXTERNAL;
  if (external) {
    check_limit();
    const ExternalBytes at = LocateExternalData(proto, base_dir, expected_bytes, what);
    // Bool bytes are checked on the way in; 4-bit ones stay packed in the mapping
    // (Tensor::PackedNibbles: the session unpacks them for kernels that do not read them so).
    if (dtype != DType::kBool && expected_bytes >= kMappedExternalBytes &&
        at.offset % kMappedExternalAlign == 0) {
      void* data = nullptr;
      if (std::shared_ptr<void> mapping = MapExternalData(at, expected_bytes, &data))
        return Is4Bit(dtype) ? Tensor::PackedNibbles(dtype, shape, data, std::move(mapping))
                             : Tensor::View(dtype, shape, data, std::move(mapping));
    }
    const std::string bytes = ReadExternalData(at, expected_bytes, what);
    Tensor t(dtype, shape);
    CopySerialized(bytes, t, what);
    return t;
  }
  if (proto.has_raw_data()) {
    OCTET_CHECK(proto.raw_data().size() == expected_bytes, what, ": has ", proto.raw_data().size(),
                " bytes of raw_data but ", DTypeName(dtype), " ", ShapeToString(shape), " needs ",
                expected_bytes);
    check_limit();
    Tensor t(dtype, shape);
    CopySerialized(proto.raw_data(), t, what);
    return t;
  }
  // One entry per element; for 4-bit types one per packed byte.
  const TypedField field = TypedFieldFor(proto, dtype);
  const size_t needed = Is4Bit(dtype) ? expected_bytes : static_cast<size_t>(numel);
  OCTET_CHECK(static_cast<size_t>(field.size) == needed, what, ": has ", field.size, " values in ",
              field.name, " but ", DTypeName(dtype), " ", ShapeToString(shape), " needs ", needed);
  check_limit();
  Tensor t(dtype, shape);
  CopyTypedField(proto, t, what);
  return t;
}

// Declared element type and shape of a graph input, output or value_info entry.
void ApplyDeclaredType(const onnx::ValueInfoProto& info, Value& value, const char* role) {
  if (!info.type().has_tensor_type()) return;  // sequences, maps, ...: not declared as tensors
  const auto& tensor_type = info.type().tensor_type();
  const auto elem = static_cast<DType>(tensor_type.elem_type());
  if (value.initializer) {
    OCTET_CHECK(elem == DType::kUndefined || elem == value.dtype, role, " '", info.name(),
                "' is declared ", TypeName(tensor_type.elem_type()), " but its initializer is ",
                DTypeName(value.dtype));
    return;
  }
  if (elem != DType::kUndefined) value.dtype = elem;
  if (!tensor_type.has_shape()) return;
  std::vector<Dim> dims;
  for (const auto& d : tensor_type.shape().dim()) {
    Dim dim;
    if (d.has_dim_value() && d.dim_value() != -1) {
      // Some exporters (paddle2onnx) write -1 for a dimension they do not know;
      // it is read as unknown. Any other negative size is malformed.
      OCTET_CHECK(d.dim_value() >= 0, role, " '", info.name(), "' has negative dimension ",
                  d.dim_value());
      dim.value = d.dim_value();
    } else if (d.has_dim_param()) {
      dim.symbol = d.dim_param();
    }
    dims.push_back(std::move(dim));
  }
  value.shape = std::move(dims);
}

Attribute AttributeFromProto(const onnx::AttributeProto& proto, const std::string& base_dir,
                             const std::string& where) {
  using Kind = Attribute::Kind;
  Attribute a;
  switch (proto.type()) {
    case onnx::AttributeProto_AttributeType_FLOAT:
      a.kind = Kind::kFloat;
      a.f = proto.f();
      break;
    case onnx::AttributeProto_AttributeType_INT:
      a.kind = Kind::kInt;
      a.i = proto.i();
      break;
    case onnx::AttributeProto_AttributeType_STRING:
      a.kind = Kind::kString;
      a.s = proto.s();
      break;
    case onnx::AttributeProto_AttributeType_TENSOR:
      a.kind = Kind::kTensor;
      a.t = TensorFromProto(proto.t(), base_dir, "attribute '" + proto.name() + "' of " + where);
      break;
    case onnx::AttributeProto_AttributeType_FLOATS:
      a.kind = Kind::kFloats;
      a.floats.assign(proto.floats().begin(), proto.floats().end());
      break;
    case onnx::AttributeProto_AttributeType_INTS:
      a.kind = Kind::kInts;
      a.ints.assign(proto.ints().begin(), proto.ints().end());
      break;
    case onnx::AttributeProto_AttributeType_STRINGS:
      a.kind = Kind::kStrings;
      a.strings.assign(proto.strings().begin(), proto.strings().end());
      break;
    // Subgraphs are recorded by kind only; a kernel that needs one refuses the node.
    case onnx::AttributeProto_AttributeType_GRAPH:
      a.kind = Kind::kGraph;
      break;
    default:
      a.kind = Kind::kOther;
      break;
  }
  return a;
}

// ---- Text: every string octet reads from the model is UTF-8 ----------------------------
//
// Names, attribute strings, metadata and external-data paths reach users (Python str,
// messages), so text Python could not decode is refused at load, naming the field.

template <typename... Where>
void CheckText(const std::string& text, const Where&... where) {
  const size_t bad = InvalidUtf8Offset(text);
  if (bad == std::string_view::npos) return;
  static const char kHex[] = "0123456789abcdef";
  const auto byte = static_cast<uint8_t>(text[bad]);
  Fail(where..., " is not valid UTF-8 (byte 0x", kHex[byte >> 4], kHex[byte & 15], " at offset ",
       bad, "): '", EscapeInvalidUtf8(text), "'");
}

void CheckMetadataText(
    const google::protobuf::RepeatedPtrField<onnx::StringStringEntryProto>& props,
    const std::string& owner) {
  for (int i = 0; i < props.size(); ++i) {
    CheckText(props.Get(i).key(), owner, " metadata_props[", i, "] key");
    CheckText(props.Get(i).value(), owner, " metadata_props[", i, "] ('", props.Get(i).key(),
              "') value");
  }
}

void CheckTensorText(const onnx::TensorProto& t, const std::string& owner) {
  CheckText(t.name(), owner, " name");
  const std::string label = owner + " ('" + t.name() + "')";
  CheckText(t.doc_string(), label, " doc_string");
  for (int i = 0; i < t.external_data_size(); ++i) {
    const auto& entry = t.external_data(i);
    CheckText(entry.key(), label, " external_data[", i, "] key");
    CheckText(entry.value(), label, " external data '", entry.key(), "'");
  }
  CheckMetadataText(t.metadata_props(), label);
}

void CheckValueInfoText(const onnx::ValueInfoProto& info, const std::string& owner) {
  CheckText(info.name(), owner, " name");
  const std::string label = owner + " ('" + info.name() + "')";
  CheckText(info.doc_string(), label, " doc_string");
  CheckMetadataText(info.metadata_props(), label);
  CheckText(info.type().denotation(), label, " type denotation");
  if (!info.type().has_tensor_type()) return;
  const auto& dims = info.type().tensor_type().shape().dim();
  for (int d = 0; d < dims.size(); ++d) {
    CheckText(dims.Get(d).dim_param(), label, " dimension ", d, " dim_param");
    CheckText(dims.Get(d).denotation(), label, " dimension ", d, " denotation");
  }
}

void CheckModelText(const onnx::ModelProto& model) {
  CheckText(model.producer_name(), "the model's producer_name");
  CheckText(model.producer_version(), "the model's producer_version");
  CheckText(model.domain(), "the model's domain");
  CheckText(model.doc_string(), "the model's doc_string");
  CheckMetadataText(model.metadata_props(), "the model's");
  for (int i = 0; i < model.opset_import_size(); ++i)
    CheckText(model.opset_import(i).domain(), "opset_import[", i, "] domain");
  for (int i = 0; i < model.functions_size(); ++i) {
    const auto& f = model.functions(i);
    CheckText(f.name(), "function ", i, " name");
    CheckText(f.domain(), "function '", f.name(), "' domain");
    CheckText(f.overload(), "function '", f.name(), "' overload");
  }
  const onnx::GraphProto& g = model.graph();
  CheckText(g.name(), "the graph's name");
  CheckText(g.doc_string(), "the graph's doc_string");
  CheckMetadataText(g.metadata_props(), "the graph's");
  for (int i = 0; i < g.initializer_size(); ++i)
    CheckTensorText(g.initializer(i), "initializer " + std::to_string(i));
  for (int i = 0; i < g.input_size(); ++i)
    CheckValueInfoText(g.input(i), "graph input " + std::to_string(i));
  for (int i = 0; i < g.output_size(); ++i)
    CheckValueInfoText(g.output(i), "graph output " + std::to_string(i));
  for (int i = 0; i < g.value_info_size(); ++i)
    CheckValueInfoText(g.value_info(i), "value_info " + std::to_string(i));
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    CheckText(n.name(), "node ", i, " name");
    const std::string label = "node " + std::to_string(i) + " ('" + n.name() + "')";
    CheckText(n.op_type(), label, " op_type");
    CheckText(n.domain(), label, " domain");
    CheckText(n.overload(), label, " overload");
    CheckText(n.doc_string(), label, " doc_string");
    for (int k = 0; k < n.input_size(); ++k) CheckText(n.input(k), label, " input ", k);
    for (int k = 0; k < n.output_size(); ++k) CheckText(n.output(k), label, " output ", k);
    CheckMetadataText(n.metadata_props(), label);
    for (int a = 0; a < n.attribute_size(); ++a) {
      const onnx::AttributeProto& attr = n.attribute(a);
      CheckText(attr.name(), label, " attribute ", a, " name");
      const std::string where = label + " attribute '" + attr.name() + "'";
      CheckText(attr.ref_attr_name(), where, " ref_attr_name");
      CheckText(attr.doc_string(), where, " doc_string");
      CheckText(attr.s(), where, " string value");
      for (int k = 0; k < attr.strings_size(); ++k)
        CheckText(attr.strings(k), where, " strings[", k, "]");
      if (attr.has_t()) CheckTensorText(attr.t(), where + " tensor");
    }
  }
}

Model BuildModel(onnx::ModelProto& proto, const std::string& base_dir) {
  Model model;
  model.ir_version = proto.ir_version();
  model.producer_name = proto.producer_name();
  OCTET_CHECK(model.ir_version >= kMinIrVersion && model.ir_version <= kMaxIrVersion, "IR version ",
              model.ir_version, " is not supported (supported: ", kMinIrVersion, " to ",
              kMaxIrVersion, ")");
  OCTET_CHECK(proto.has_graph(), "the model has no graph");
  CheckModelText(proto);
  Graph& graph = model.graph;

  for (const auto& opset : proto.opset_import()) {
    const std::string domain = NormalizeDomain(opset.domain());
    OCTET_CHECK(opset.version() >= 1 && opset.version() <= INT_MAX, "opset import for domain '",
                domain, "' has invalid version ", opset.version());
    const auto [it, inserted] = graph.opset_imports.emplace(domain, opset.version());
    OCTET_CHECK(inserted || it->second == opset.version(), "domain '", domain,
                "' is imported at two opset versions, ", it->second, " and ", opset.version());
  }
  std::set<std::pair<std::string, std::string>> local_functions;
  for (const auto& function : proto.functions())
    local_functions.emplace(NormalizeDomain(function.domain()), function.name());

  onnx::GraphProto& graph_proto = *proto.mutable_graph();
  if (graph_proto.sparse_initializer_size() > 0) {
    const auto& values = graph_proto.sparse_initializer(0).values();
    Fail("sparse initializer '", EscapeInvalidUtf8(values.name()), "' is not supported");
  }
  for (onnx::TensorProto& init : *graph_proto.mutable_initializer()) {
    OCTET_CHECK(!init.name().empty(), "an initializer has no name");
    const int id = graph.AddValue(init.name());
    OCTET_CHECK(!graph.values[id].initializer, "initializer '", init.name(), "' appears twice");
    graph.SetInitializer(id, TensorFromProto(init, base_dir, "initializer '" + init.name() + "'"));
    // The weights now live in the Tensor: free the protobuf copy now (Clear keeps
    // the strings' capacity).
    onnx::TensorProto().Swap(&init);
  }
  for (const auto& info : graph_proto.input()) {
    OCTET_CHECK(!info.name().empty(), "a graph input has no name");
    const int id = graph.AddValue(info.name());
    ApplyDeclaredType(info, graph.values[id], "graph input");
    if (graph.values[id].initializer) continue;  // a default value, not a required input
    OCTET_CHECK(std::find(graph.inputs.begin(), graph.inputs.end(), id) == graph.inputs.end(),
                "graph input '", info.name(), "' is listed twice");
    graph.inputs.push_back(id);
  }
  for (const auto& info : graph_proto.output()) {
    OCTET_CHECK(!info.name().empty(), "a graph output has no name");
    const int id = graph.AddValue(info.name());
    ApplyDeclaredType(info, graph.values[id], "graph output");
    graph.outputs.push_back(id);
  }
  for (const auto& info : graph_proto.value_info()) {
    if (info.name().empty()) continue;
    ApplyDeclaredType(info, graph.values[graph.AddValue(info.name())], "value");
  }

  for (const auto& node_proto : graph_proto.node()) {
    Node node;
    node.name = node_proto.name();
    node.op_type = node_proto.op_type();
    node.domain = NormalizeDomain(node_proto.domain());
    const std::string label = node.op_type + "(" + node.domain + ") node '" + node.name + "'";
    OCTET_CHECK(!node.op_type.empty(), "node '", node.name, "' has no op_type");
    // octet's own nodes exist only as its rewrites make them (graph/octet_ops.h states
    // what their kernels may assume); a model may not bring its own.
    OCTET_CHECK(node.domain != kOctetDomain, label, ": domain '", kOctetDomain,
                "' is reserved for the nodes octet's rewrites make");
    OCTET_CHECK(!local_functions.count({node.domain, node.op_type}), label,
                ": calls the model-local function '", node.domain, ".", node.op_type,
                "', which is not supported (inline it first, e.g. with onnx.inliner)");
    const auto opset = graph.opset_imports.find(node.domain);
    OCTET_CHECK(opset != graph.opset_imports.end(), label,
                ": the model has no opset import for domain '", node.domain, "'");
    node.opset = opset->second;
    for (const std::string& name : node_proto.input())
      node.inputs.push_back(name.empty() ? -1 : graph.AddValue(name));
    for (const std::string& name : node_proto.output())
      node.outputs.push_back(name.empty() ? -1 : graph.AddValue(name));
    for (const auto& attr : node_proto.attribute()) {
      OCTET_CHECK(!attr.name().empty(), node.Describe(), ": has an attribute without a name");
      const bool inserted =
          node.attributes.emplace(attr.name(), AttributeFromProto(attr, base_dir, node.Describe()))
              .second;
      OCTET_CHECK(inserted, node.Describe(), ": attribute '", attr.name(), "' appears twice");
    }
    graph.nodes.push_back(std::move(node));
  }
  graph.TopologicalSort();
  for (int id : graph.outputs) {
    const Value& v = graph.values[id];
    const bool is_input =
        std::find(graph.inputs.begin(), graph.inputs.end(), id) != graph.inputs.end();
    OCTET_CHECK(v.producer >= 0 || v.initializer || is_input, "graph output '", v.name,
                "' is not a graph input, an initializer or a node output");
  }
  return model;
}

void CheckModelSize(uint64_t size, const std::string& source) {
  OCTET_CHECK(size > 0, "failed to parse ONNX model ", source, ": it is empty");
  OCTET_CHECK(size <= static_cast<uint64_t>(INT_MAX), "failed to parse ONNX model ", source,
              ": larger than protobuf's 2 GiB limit (store the weights as external data)");
}

onnx::ModelProto ParseModel(const void* data, size_t size, const std::string& source) {
  CheckModelSize(size, source);
  onnx::ModelProto proto;
  OCTET_CHECK(proto.ParseFromArray(data, static_cast<int>(size)), "failed to parse ONNX model ",
              source, ": not a valid ModelProto (truncated or corrupted file?)");
  return proto;
}

// Every failure after parsing gets `source` as context.
Model ConvertModel(onnx::ModelProto& proto, const std::string& base_dir,
                   const std::string& source) {
  try {
    return BuildModel(proto, base_dir);
  } catch (const Error& e) {
    FailWithContext(e, "failed to load ONNX model ", source, ": ");
  }
}

}  // namespace

Model LoadModelFromFile(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  OCTET_CHECK(status.type() != fs::file_type::not_found, "cannot open ONNX model '", path,
              "': file does not exist");
  OCTET_CHECK(!ec, "cannot open ONNX model '", path, "': ", ec.message());
  OCTET_CHECK(!fs::is_directory(status), "cannot open ONNX model '", path, "': it is a directory");
  const std::string source = "'" + path + "'";
  // Parsed from the stream: the file's bytes are never all in memory beside the message.
  std::ifstream in(path, std::ios::binary);
  OCTET_CHECK(in, "cannot open ONNX model '", path, "': ", std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  OCTET_CHECK(size >= 0, "cannot read ONNX model '", path, "'");
  CheckModelSize(static_cast<uint64_t>(size), source);
  in.seekg(0);
  onnx::ModelProto proto;
  OCTET_CHECK(proto.ParseFromIstream(&in) && in.peek() == std::char_traits<char>::eof(),
              "failed to parse ONNX model ", source,
              ": not a valid ModelProto (truncated or corrupted file?)");
  in.close();
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  return ConvertModel(proto, folder.string(), source);
}

Model LoadModelFromBytes(const void* data, size_t size, const std::string& base_dir) {
  const std::string source = detail::Concat("(", size, " bytes in memory)");
  onnx::ModelProto proto = ParseModel(data, size, source);
  return ConvertModel(proto, base_dir, source);
}

}  // namespace octet
