// Element types. Values equal ONNX TensorProto.DataType so that conversion
// from the protobuf is a cast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace octet {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
};

// ONNX spelling ("float", "uint8", "float8e4m3fn", ...); "undefined(N)" for others.
std::string DTypeName(DType t);

// Bytes per element in octet's in-memory layout. 4-bit types are stored
// unpacked, one element per byte (but for Tensor::PackedNibbles). 0 for types
// octet cannot hold (string, complex).
size_t DTypeSize(DType t);

// Unpacks `count` 4-bit values held two per byte (value 2 i in byte i's low nibble, as ONNX
// packs int4 and uint4) to one per byte: 0..15, or with is_signed -8..7.
void Unpack4Bit(const uint8_t* packed, int64_t count, bool is_signed, uint8_t* out);

bool IsFloat8(DType t);
bool IsFloatingPoint(DType t);  // float32/64, float16, bfloat16, float8 types
bool IsInteger(DType t);        // signed or unsigned ints of any width, incl. 4-bit
bool IsSupportedStorage(DType t);  // DTypeSize(t) != 0

// Maps a C++ element type to its DType.
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct DTypeOf<uint16_t> { static constexpr DType value = DType::kUInt16; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::kInt16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<uint32_t> { static constexpr DType value = DType::kUInt32; };
template <> struct DTypeOf<uint64_t> { static constexpr DType value = DType::kUInt64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };

}  // namespace octet
