// The contracts of the operators in octet's own domain. The rewrite passes
// (src/rewrite) put these nodes in place of the groups they replace; the
// kernels in src/ops implement them. Both sides read this page and nothing of
// each other. Every op computes exactly the bits of the nodes it replaces.
#pragma once

#include <cstdint>

namespace octet {

inline constexpr const char* kOctetDomain = "octet";

// octet.QLinearMatMulFused (rewrite/qdq_matmul.h, ops/fused_qdq_matmul.cc):
// DequantizeLinear(x), DequantizeLinear(W constant) -> MatMul | Gemm
// [-> QuantizeLinear], multiplied on the 8-bit integers and requantized once in
// ONNX Runtime's float order (docs/epilogue.md). Without y_scale the output is
// float (MatMulIntegerToFloat semantics). Inputs (-1 = omitted):
inline constexpr const char* kFusedMatMulOp = "QLinearMatMulFused";
enum FusedMatMulInput {
  kFusedX = 0,   // int8/uint8 activations [..., K]
  kFusedXScale,  // float32, one value or one per index of attribute x_axis
  kFusedXZero,   // optional, x's dtype, same layout as the scale
  kFusedW,       // int8/uint8 constant weight, [K, N], or [N, K] when trans_b=1
  kFusedWScale,  // float32 constant, one value or N (per output column)
  kFusedWZero,   // optional, W's dtype, same layout as the scale
  kFusedYScale,  // optional float32 scalar; omitted = float output
  kFusedYZero,   // optional 8-bit scalar
  kFusedBias,    // optional int32 constant, one value or N; scale is x_scale * w_scale
  kFusedInputCount
};
// Attributes: x_axis (-1 = per tensor, else the axis of x the scale runs along,
// never the last), x_rank (x's rank when x_axis >= 0), trans_b (0/1),
// y_type (DType of the quantized output when y_zero_point is omitted),
// y_min / y_max (optional: clamp of the quantized output, from an absorbed
// Relu / Clip; rewrite/qdq_activation.h).

// octet.QLinearMatMulSiblings(x, x_scale, x_zero_point?, w_1, w_scale_1, w_zero_point_1?,
// bias_1?, ..., w_n, ...) -> (y_1, ..., y_n) (rewrite/sibling_products.h,
// ops/fused_qdq_matmul.cc): n >= 2 QLinearMatMulFused products of one x with float
// outputs (inputs as there; x's scale per tensor), each y_i with the bits it has alone,
// their weights packed side by side for one GEMM. Attribute trans_b: one value per w.
inline constexpr const char* kFusedMatMulSiblingsOp = "QLinearMatMulSiblings";

// octet.QLinearConvFused (rewrite/qdq_conv.h, ops/fused_qdq_conv.cc):
// DequantizeLinear(x), DequantizeLinear(W constant), [DequantizeLinear(int32
// bias)] -> Conv [-> Relu | Clip] -> QuantizeLinear, run as QLinearConv: the
// same bits as ORT_ENABLE_ALL's QLinearConv. Inputs are QLinearConv's, with the
// zero points optional (-1 = omitted, meaning 0 of the operand's type):
inline constexpr const char* kFusedConvOp = "QLinearConvFused";
enum FusedConvInput {
  kFusedConvX = 0,   // int8/uint8 activations [N, C, (H,) W]
  kFusedConvXScale,  // float32 scalar
  kFusedConvXZero,   // optional, x's dtype, scalar
  kFusedConvW,       // int8/uint8 constant weight [M, C/group, (kH,) kW]
  kFusedConvWScale,  // float32 constant, one value or M (per output channel)
  kFusedConvWZero,   // optional, W's dtype, same layout as the scale
  kFusedConvYScale,  // float32 scalar
  kFusedConvYZero,   // optional 8-bit scalar
  kFusedConvBias,    // optional int32 constant [M]; its scale is x_scale * w_scale[o]
  kFusedConvInputCount
};
// The output parameters sit where the fused MatMul node has them, so the Relu /
// Clip absorption reads both node kinds alike.
static_assert(int{kFusedConvYScale} == int{kFusedYScale} &&
              int{kFusedConvYZero} == int{kFusedYZero});
// Attributes: the Conv's own (auto_pad, group, kernel_shape, strides, dilations,
// pads), y_type (DType of the output when y_zero_point is omitted), y_min / y_max
// (optional integer clamp of the output, from an absorbed Relu / Clip).

// octet.QdqAdd | QdqMul (rewrite/qdq_binary.h, ops/qlinear_binary.cc):
// DequantizeLinear(a), DequantizeLinear(b) -> Add | Mul -> QuantizeLinear, with
// com.microsoft QLinearAdd | QLinearMul's inputs (A, A_scale, A_zero, B, B_scale,
// B_zero, C_scale, C_zero). A and B may differ in type; C's type is its zero
// point's, or attribute y_type. Attribute arithmetic="qlinear" with shift=[a, b, c]
// computes ORT's QLinear kernel after moving those tensors from int8 to uint8
// (shift 128 each); arithmetic="float" computes ORT's three float32 nodes.
inline constexpr const char* kQdqAddOp = "QdqAdd";
inline constexpr const char* kQdqMulOp = "QdqMul";

// octet.LookupTable(x, table) (rewrite/qdq_lookup.h, ops/lookup_table.cc):
// y = table[x] for 8-bit x, where the 256-entry table (any type of 1, 2, 4 or 8
// bytes) holds a pointwise chain's result for every value x can take, in index
// order (uint8 0..255, int8 -128..127). Attribute min_rank: the output's rank is
// at least this (the chain's constants may have had a higher rank than x).
inline constexpr const char* kLookupTableOp = "LookupTable";

// octet.FloatAttention(q, k_t, divisor, mask, v) (rewrite/float_attention.h,
// ops/float_ops.cc) = MatMul(Softmax(Add(Div(MatMul(q, k_t), divisor), mask),
// axis=-1), v). Attribute mask_first=1 spells Add(mask, scores); scale_mul=1 spells
// Mul(scores, divisor) (a factor). heads_inner=1 takes the heads' Transposes in too:
// q, v and the result are [batch, sequence, heads, head size] and k is k_t before its
// Transpose(perm=[0,2,3,1]). keys_rows=1 (decoders): k is k_t before its
// Transpose(perm=[0,1,3,2]); with kv_repeat=g, kv_heads=H, kv_size=d, v_size=dv, k and
// v are before grouped-query attention's repeat_kv, Reshape(Expand(Unsqueeze(x, [2]),
// [1, 1, g, 1, 1]), [0, H, -1, d or dv]), each head of k and v read by g heads of q.
// appends_kv=1 (with keys_rows; rewrite/float_attention.h, FuseKvAppend): inputs
// (q, past_k, divisor, mask, past_v, new_k, new_v), outputs (y, present_k, present_v),
// k and v being the presents, Concat(past, new, axis=2); cache_slot=i names the node's
// rows in a KV cache the caller holds across runs (ops/kv_cache.h).
inline constexpr const char* kFloatAttentionOp = "FloatAttention";

// octet.MaskedSoftmax(x, table, mask, y_scale, y_zero_point) (rewrite/float_attention.h,
// ops/float_ops.cc) = QuantizeLinear(Softmax(Add(LookupTable(x, table), mask),
// axis=-1), y_scale, y_zero_point), the lookup and the quantization each optional.
// Attribute mask_first=1 spells Add(mask, scores); min_rank is the lookup's.
inline constexpr const char* kMaskedSoftmaxOp = "MaskedSoftmax";

// octet.Rotary(x, cos, sin) (rewrite/float_rotary.h, ops/float_ops.cc) =
// Add(Mul(x, cos), Mul(Concat(Neg(Slice(x, half, end)), Slice(x, 0, half), axis=-1), sin)):
// rotary position embedding's rotate-half form, the Slices over x's last axis with step 1
// and the integer attributes half > 0 and end >= half as their bounds (clamped to the axis
// as Slice clamps them). Float32; x, cos, sin and the rotated x broadcast as the nodes do.
inline constexpr const char* kRotaryOp = "Rotary";

// octet.GatedSilu(gate, up) (rewrite/float_silu.h, ops/float_ops.cc) =
// Mul(Mul(gate, Sigmoid(gate)), up): the SiLU-gated product of decoder MLPs. Float32;
// gate and up broadcast as the outer Mul does.
inline constexpr const char* kGatedSiluOp = "GatedSilu";

// octet.Int8DynamicMatMul(x, w, w_scale) (rewrite/float_matmul_int8.h,
// ops/int8_dynamic_matmul.cc): the forward route for a float MatMul(x, W) with a
// constant W [K, N]. w is W quantized per column once (int8 [K, N], symmetric,
// w_scale[n] = amax_k |W[k, n]| / 127, w = round_half_even(W / w_scale) in
// [-127, 127], 0 where w_scale is 0); each run quantizes every row of x [..., K]
// the same way (s_row = amax / 127) and computes
//   y[m, n] = (float(sum_k x_q[m, k] * w[k, n]) * s_row[m]) * w_scale[n]
// in float32, in that order. An approximation of the float product (docs/ort-ep.md
// gives its error), not equal to it.
inline constexpr const char* kInt8DynamicMatMulOp = "Int8DynamicMatMul";

// octet.BlockedDqMatMul(x, w, scale, zero_point?) (rewrite/qdq_nbits.h,
// ops/matmul_nbits.cc) = MatMul(x, DequantizeLinear(w, scale, zero_point,
// axis=0, block_size)) in float, in the 4-bit kernel's order (kernels/nbits/nbits.h,
// kFloat: the codes' products per block, the zero point and the scale once per
// block; another rounding than the pair node by node), and the float weights are
// never made. x
// float [..., K]; w int4/uint4 constant [K, N]; scale float32 constant
// [ceil(K / block_size), N]; zero_point optional (0), w's type, scale's shape.
// Attribute block_size (a power of two >= 16). Attribute accuracy_level=4 (the
// forward route, rewrite/float_matmul_int8.h) computes MatMulNBits' int8
// arithmetic instead (kInt8): ONNX Runtime's result for the pair, not the graph's.
inline constexpr const char* kBlockedDqMatMulOp = "BlockedDqMatMul";
enum BlockedDqMatMulInput { kBlockedDqX = 0, kBlockedDqW, kBlockedDqScale, kBlockedDqZero };

// octet.NBitsSiblings(x, w_1, scale_1, zero_1, ..., w_n, scale_n, zero_n) -> (y_1, ..., y_n)
// (rewrite/sibling_products.h, ops/matmul_nbits.cc): n >= 2 4-bit products of one x, each
// with the bits it has alone (y_i = the node it replaced), their weights packed side by
// side so that one pass over the packed columns computes them all. Attribute `of` names
// the products: "com.microsoft.MatMulNBits" (w_i, scale_i, zero_i its B, scales and
// zero_points; attributes K, bits, block_size and accuracy_level shared, N per product
// in the ints `n`) or "octet.BlockedDqMatMul" (its w, scale and zero_point; attributes
// block_size and accuracy_level shared). An omitted zero_i is -1, as in the product.
inline constexpr const char* kNBitsSiblingsOp = "NBitsSiblings";

// The products a sibling node merges have N a multiple of this, but the last: the kernels
// write each product's columns straight to its output (kernels/output_columns.h's
// kOutputColumnsAlign, which ops/registry.cc checks is the same).
inline constexpr int64_t kSiblingColumnsAlign = 64;

// Attributes of ai.onnx QLinearMatMul set by rewrite/int8_attention.h: a head
// Transpose folded into the product, read or written through strides
// (ops/int_matmul_shape.h MatMulHeadLayout): perm [0, 2, 1, 3] on A, B or Y, or
// [0, 2, 3, 1] on B.
inline constexpr const char* kAPermAttr = "octet_a_perm";
inline constexpr const char* kBPermAttr = "octet_b_perm";
inline constexpr const char* kYPermAttr = "octet_y_perm";

}  // namespace octet
