#include "ops/int_params.h"

#include "core/float_types.h"

namespace octet {

std::vector<float> ReadScales(const Node& node, const Tensor& scale, const char* name) {
  std::vector<float> values(static_cast<size_t>(scale.numel()));
  switch (scale.dtype()) {
    case DType::kFloat32: {
      const float* p = scale.data<float>();
      values.assign(p, p + scale.numel());
      break;
    }
    case DType::kFloat16:
    case DType::kBFloat16: {
      const uint16_t* p = scale.data<uint16_t>();
      const bool half = scale.dtype() == DType::kFloat16;
      for (size_t i = 0; i < values.size(); ++i)
        values[i] = half ? Float16BitsToFloat(p[i]) : BFloat16BitsToFloat(p[i]);
      break;
    }
    default:
      Fail(node.Describe(), ": ", name, " has dtype ", DTypeName(scale.dtype()),
           "; expected float, float16 or bfloat16");
  }
  return values;
}

std::vector<int32_t> ReadZeroPoints(const Node& node, const Tensor& zero_point, DType expected,
                                    const char* name) {
  OCTET_CHECK(zero_point.dtype() == expected, node.Describe(), ": ", name, " has dtype ",
              DTypeName(zero_point.dtype()), " but must match its input's dtype ",
              DTypeName(expected));
  std::vector<int32_t> values(static_cast<size_t>(zero_point.numel()));
  if (expected == DType::kUInt8) {
    const uint8_t* p = zero_point.data<uint8_t>();
    values.assign(p, p + zero_point.numel());
  } else if (expected == DType::kInt8) {
    const int8_t* p = zero_point.data<int8_t>();
    values.assign(p, p + zero_point.numel());
  } else {
    Fail(node.Describe(), ": ", name, " has dtype ", DTypeName(expected),
         "; expected uint8 or int8");
  }
  return values;
}

void CheckPerTensor(const Node& node, const Tensor& param, const char* name) {
  OCTET_CHECK(param.numel() == 1, node.Describe(), ": ", name, " has shape ",
              ShapeToString(param.shape()), "; only a single (per-tensor) value is supported");
}

}  // namespace octet
