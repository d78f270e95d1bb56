#include "core/dtype.h"

namespace octet {

std::string DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "float";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kString: return "string";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "double";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kComplex64: return "complex64";
    case DType::kComplex128: return "complex128";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat8E4M3FN: return "float8e4m3fn";
    case DType::kFloat8E4M3FNUZ: return "float8e4m3fnuz";
    case DType::kFloat8E5M2: return "float8e5m2";
    case DType::kFloat8E5M2FNUZ: return "float8e5m2fnuz";
    case DType::kUInt4: return "uint4";
    case DType::kInt4: return "int4";
    case DType::kFloat4E2M1: return "float4e2m1";
    case DType::kUndefined: break;
  }
  return "undefined(" + std::to_string(static_cast<int>(t)) + ")";
}

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 4;
    case DType::kFloat64: case DType::kInt64: case DType::kUInt64: return 8;
    case DType::kUInt16: case DType::kInt16: case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kUInt8: case DType::kInt8: case DType::kBool:
    case DType::kFloat8E4M3FN: case DType::kFloat8E4M3FNUZ: case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ: case DType::kUInt4: case DType::kInt4: return 1;
    default: return 0;
  }
}

bool IsFloat8(DType t) {
  return t == DType::kFloat8E4M3FN || t == DType::kFloat8E4M3FNUZ || t == DType::kFloat8E5M2 ||
         t == DType::kFloat8E5M2FNUZ;
}

bool IsFloatingPoint(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16 || IsFloat8(t);
}

bool IsInteger(DType t) {
  switch (t) {
    case DType::kUInt8: case DType::kInt8: case DType::kUInt16: case DType::kInt16:
    case DType::kInt32: case DType::kInt64: case DType::kUInt32: case DType::kUInt64:
    case DType::kUInt4: case DType::kInt4: return true;
    default: return false;
  }
}

bool IsSupportedStorage(DType t) { return DTypeSize(t) != 0; }

namespace {

template <bool kSigned>
uint8_t FourBitValue(uint8_t nibble) {
  return kSigned ? static_cast<uint8_t>(static_cast<int8_t>((nibble ^ 8) - 8)) : nibble;
}

// A byte at a time (both nibbles), so that the loop vectorizes.
template <bool kSigned>
void Unpack4BitAs(const uint8_t* packed, int64_t count, uint8_t* out) {
  for (int64_t i = 0; i < count / 2; ++i) {
    out[2 * i] = FourBitValue<kSigned>(packed[i] & 15);
    out[2 * i + 1] = FourBitValue<kSigned>(packed[i] >> 4);
  }
  if (count % 2) out[count - 1] = FourBitValue<kSigned>(packed[count / 2] & 15);
}

}  // namespace

void Unpack4Bit(const uint8_t* packed, int64_t count, bool is_signed, uint8_t* out) {
  if (is_signed)
    Unpack4BitAs<true>(packed, count, out);
  else
    Unpack4BitAs<false>(packed, count, out);
}

}  // namespace octet
