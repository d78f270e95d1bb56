// The float attention of exported encoders (tools/models/build_minilm.py and
// the dynamic-quantized models keep it in float):
//
//   y = MatMul(Softmax(Add(Div(MatMul(q, k_t), divisor), mask), axis=-1), v)
//
// becomes one octet.FloatAttention(q, k_t, divisor, mask, v) (graph/octet_ops.h),
// which runs each head of each sequence start to end with its scores in cache
// instead of five passes over the whole scores tensor. Each element takes the
// same operations as in the five nodes, so the result has the same bits. The
// intermediate values must have no other reader and not be graph outputs.
// When q and v come from Transpose(perm=[0,2,1,3]), k_t from
// Transpose(perm=[0,2,3,1]) and y goes to Transpose(perm=[0,2,1,3]) (the
// heads split off and merged back), those four are taken in too
// (heads_inner=1): each head is read and written in place.
// Decoders write the scale as Mul(scores, factor) (scale_mul=1) and k_t as
// Transpose(k, perm=[0,1,3,2]) (keys_rows=1), k and v often after grouped-query
// attention's repeat_kv (Unsqueeze, Expand, Reshape with constant shapes), which is
// taken in too: each key and value head is then read in place by the query heads
// that share it, instead of being copied once per head.
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_report.h"

namespace octet {

void FuseFloatAttention(Graph& g, QdqReport& report);

// A decoder's KV cache: present = Concat(past, new, axis=2) for the keys and for the
// values of one decoder-form octet.FloatAttention, each past a graph input of rank 4
// read by its Concat alone, each present read by the attention alone (and perhaps a
// graph output). The Concats are taken into the attention (appends_kv=1, cache_slot=i
// numbering them), which then computes the presents itself, or, when the caller holds a
// KV cache across runs (runtime/session.h, KvCache), appends the new rows to the cache in
// place and reads the past there: a step no longer copies the whole cache. Runs after
// FuseFloatAttention.
void FuseKvAppend(Graph& g, QdqReport& report);

// The scores of quantized attention after the QDQ passes (rewrite/qdq_lookup.h made
// the dequantization a table):
//
//   y = QuantizeLinear(Softmax(Add(LookupTable(x, table), mask), axis=-1), scale, zero_point)
//
// becomes one octet.MaskedSoftmax(x, table, mask, scale, zero_point) (graph/octet_ops.h), which
// takes each row from x to y in cache instead of three float passes over the scores. The lookup and
// the quantization (one constant scale and zero point, 8-bit) are each optional; the bits are those
// of the separate nodes. Runs after the lookup pass.
void FuseMaskedSoftmax(Graph& g, QdqReport& report);

}  // namespace octet
