#include "kernels/int8/conv.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/int8/conv_depthwise.h"
#include "kernels/int8/conv_indirect.h"
#include "kernels/int8/conv_pack.h"
#include "kernels/int8/gemm.h"
#include "kernels/int8/gemm_kernels.h"

namespace octet {

namespace conv {

// One way of computing a convolution, chosen once per weight; owns what it
// packed from the weights.
class Path {
 public:
  virtual ~Path() = default;
  virtual void Run(const ConvGeometry& g, const Int8ConvOperand& x, const Epilogue& e, void* y,
                   ThreadPool* pool) const = 0;
  virtual const char* name() const = 0;
};

}  // namespace conv

namespace {

using gemm::MicroKernel;
using gemm::TileArgs;

// Blocking, fixed by the shape (and, for the output-channel split, whether
// there is more than one thread; the sums are exact, so results never depend
// on it). A block of output pixels is packed at once: at most kPackBytes of
// packed im2col (it stays in L2) and at most kMaxBlockPixels pixels. k is cut
// into the fewest equal blocks whose B micro-panel (nr columns of a block's k)
// fits kBPanelBytes, so it stays in L1 while the weight panels stream from L2,
// as in the GEMM; equal blocks, because a short last block pays a whole tile's
// partial-sum traffic for little work.
constexpr int64_t kPackBytes = 192 * 1024;
constexpr int64_t kMaxBlockPixels = 256;
constexpr int64_t kBPanelBytes = 16 * 1024;
// The AVX-512 requantizing tile (conv_pack.h) runs all of k at once: up to 1024
// k, a 32 KiB x panel (L1) -- every 1x1 convolution of the detector.
constexpr int64_t kRequantTileMaxK = 1024;
// Output channels are computed kAccChunkBytes of int32 accumulators at a time
// (at least one row panel), so the partial sums between k blocks stay in L1.
constexpr int64_t kAccChunkBytes = 16 * 1024;
// Convolutions with fewer multiply-adds are not cut into more blocks for the
// threads: handing work to another costs more than it saves (the detector's
// 1- and 4-channel heads, 0.02-1 M).
constexpr int64_t kMinSplitMacs = int64_t{1} << 20;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The number of blocks `units` (pixel panels, pixel tiles, input rows) are cut
// into: at most max_units each, and with several threads a multiple of the
// thread count, so that ParallelFor's equal chunks get equal work (the
// detector's 13x13 and 26x26 layers have only 1-11 blocks). Block b covers
// units [BlockBegin(b), BlockBegin(b + 1)), sizes within one unit of each
// other. (The sums are exact: blocking never changes the results.)
int64_t BalancedBlocks(int64_t units, int64_t max_units, int threads) {
  const int64_t blocks = CeilDiv(units, max_units);
  return threads > 1 ? std::min(units, CeilDiv(blocks, threads) * threads) : blocks;
}
int64_t BlockBegin(int64_t block, int64_t units, int64_t blocks) { return block * units / blocks; }

// The thread count the blocking is balanced for (1: the shape's own blocks).
int SplitThreads(const ConvGeometry& g, int64_t k, const ThreadPool* pool) {
  if (pool == nullptr || g.batch * g.out_channels * g.out_h * g.out_w * k < kMinSplitMacs) return 1;
  return pool->num_threads();
}

// NHWC paths: a work item is a band of whole micro-tiles whose padded NHWC
// input rows take at most about kBandBytes, so the band built right before its
// tiles is still in L2 when they read it.
constexpr int64_t kBandBytes = 96 * 1024;

// Per-thread buffers reused across runs.
struct Scratch {
  std::vector<uint8_t> packed_b;
  std::vector<int8_t> rows;  // k_group im2col rows of the block
  std::vector<int32_t> col_sum, col_term, col_zb, partial;
  std::vector<int32_t> plane;              // depthwise input channel
  std::vector<int32_t> acc;                // depthwise output rows
  std::vector<uint8_t> phases;             // the group's phase planes (conv_pack.h)
  std::vector<uint8_t> band;               // the NHWC paths' padded input rows
  std::vector<const uint8_t*> band_bases;  // their micro-tiles' pixel base positions
};
Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// The calling thread's per-run buffers, shared by the pool's threads during the
// run: the runs' offsets and the per-channel constants.
struct RunScratch {
  std::vector<int64_t> run_offsets;
  std::vector<int32_t> bias, row_offset, zeros;
  std::vector<float> multipliers;
};
RunScratch& ThreadRunScratch() {
  thread_local RunScratch scratch;
  return scratch;
}

// The convolution's epilogue in the tile form of the AVX-512 register paths
// (conv_requant.h): for output channels [0, channels) of `size` entries (the
// rest 0), the bias plus term(o) (int32, wrapping) and, for 8-bit outputs, the
// multiplier; the clamp.
template <typename TermFn>
conv::ChannelRequant ChannelRequantFor(const Epilogue& e, int64_t channels, int64_t size,
                                       const TermFn& term, RunScratch& run) {
  run.bias.assign(size, 0);
  run.multipliers.assign(e.is_8bit() ? size : 0, 0.0f);
  for (int64_t o = 0; o < channels; ++o) {
    const uint32_t bias = e.bias.present() ? static_cast<uint32_t>(e.bias.At(o, 0)) : 0u;
    run.bias[o] = static_cast<int32_t>(bias + static_cast<uint32_t>(term(o)));
    if (e.is_8bit()) run.multipliers[o] = e.multiplier.At(o, 0);
  }
  conv::ChannelRequant rq;
  rq.bias = run.bias.data();
  if (e.is_8bit()) {
    rq.multipliers = run.multipliers.data();
    std::tie(rq.lo, rq.hi) = EpilogueFloatClamp(e);
    rq.zero_point = e.zero_point;
    rq.signed_output = e.output == EpilogueOutput::kInt8;
  }
  return rq;
}

#if defined(__x86_64__) || defined(_M_X64)
// One band of an NHWC path: batch item n's output pixels [p0, p1) and the
// padded rows [row0, row1) of its image their taps reach.
struct ImageBand {
  int64_t n = 0, p0 = 0, p1 = 0, row0 = 0, row1 = 0;
};

// The padded image of a convolution's x: pad_left columns of zb before each
// row of x and after it as many as the last output pixel's taps reach; int8 x
// is stored as x + 128 (flip) and zb is the zero point in that uint8 domain.
// Either NHWC rows of cp bytes per pixel (pixel_bytes == cp, conv_indirect.h)
// or cp / 16 planes of 16-channel blocks, 16 bytes per pixel (pixel_bytes ==
// 16, conv_depthwise.h).
struct PaddedImage {
  int64_t cp = 0, pixel_bytes = 0, padded_w = 0, row_bytes = 0, tap_rows = 0;
  uint8_t flip = 0, zb = 0;
};
PaddedImage PaddedImageFor(const ConvGeometry& g, const Int8ConvOperand& x, int64_t cp,
                           int64_t pixel_bytes) {
  PaddedImage im;
  im.cp = cp;
  im.pixel_bytes = pixel_bytes;
  im.tap_rows = (g.kernel_h - 1) * g.dilation_h + 1;
  im.padded_w = std::max(g.pad_left + g.in_w,
                         (g.out_w - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w + 1);
  im.row_bytes = im.padded_w * cp;
  im.flip = x.is_signed ? 0x80 : 0;
  im.zb = static_cast<uint8_t>((x.zero ? x.zero[0] : 0) + (x.is_signed ? 128 : 0));
  return im;
}

// The band's padded rows of x_item (batch item n's NCHW x) in im's layout,
// planes plane_stride bytes apart (one plane for NHWC rows): pad_top rows and
// pad_left columns of zb before x, zb after it.
void BuildBand(const ConvGeometry& g, const PaddedImage& im, const uint8_t* x_item,
               const ImageBand& band, int64_t plane_stride, uint8_t* image) {
  const int64_t pb = im.pixel_bytes, row_bytes = im.padded_w * pb;
  const int64_t right_pad = im.padded_w - g.pad_left - g.in_w, in_pixels = g.in_h * g.in_w;
  // Padded rows [x_row0, x_row1) hold x's rows x_row0 - pad_top onward.
  const int64_t x_row0 = std::clamp(g.pad_top, band.row0, band.row1);
  const int64_t x_row1 = std::clamp(g.pad_top + g.in_h, x_row0, band.row1);
  for (int64_t c0 = 0; c0 < im.cp; c0 += pb) {  // a plane of pb channels
    uint8_t* const plane = image + c0 / pb * plane_stride;
    const uint8_t* const x_plane = x_item + c0 * in_pixels + (x_row0 - g.pad_top) * g.in_w;
    const int64_t channels = std::min(pb, g.in_channels - c0);
    // count pixels of x from x_run into dst, pb bytes each.
    auto rearrange = [&](const uint8_t* x_run, int64_t count, uint8_t* dst) {
      if (pb == im.cp) {
        conv::ToNhwcAvx512Vnni(x_run, channels, in_pixels, count, im.flip, im.cp, dst);
      } else {
        conv::ToBlocked16Avx512Vnni(x_run, channels, in_pixels, count, im.flip, dst);
      }
    };
    std::fill_n(plane, (x_row0 - band.row0) * row_bytes, im.zb);
    std::fill(plane + (x_row1 - band.row0) * row_bytes, plane + (band.row1 - band.row0) * row_bytes,
              im.zb);
    uint8_t* const first = plane + (x_row0 - band.row0) * row_bytes + g.pad_left * pb;
    if (g.pad_left == 0 && right_pad == 0) {  // x's rows are one run
      rearrange(x_plane, (x_row1 - x_row0) * g.in_w, first);
      continue;
    }
    for (int64_t r = 0; r < x_row1 - x_row0; ++r) {
      uint8_t* const row = first + r * row_bytes;
      std::fill_n(row - g.pad_left * pb, g.pad_left * pb, im.zb);
      std::fill_n(row + g.in_w * pb, right_pad * pb, im.zb);
      rearrange(x_plane + r * g.in_w, g.in_w, row);
    }
  }
}

// Calls tile(pixels, n, p, count, q0, q1, plane_stride), a function each
// thread gets from make_tile() (so a tile's arguments are set up once per
// thread, not per tile), for every micro-tile
// of kTilePixels output pixels [p, p + count) of batch item n, with their base
// positions in the band's padded image (in its first plane; pixels past count
// repeat the last one: read, never stored), for panels [q0, q1) of `panels`. Work items are bands
// of whole micro-tiles whose padded input rows take about kBandBytes, each
// built in the thread's scratch right before its tiles; the panels are split
// only when there are fewer bands than threads (the parts of one band on one
// thread build it once). kPanelsOuter: a band's tiles are run one panel at a
// time (panel by panel instead of tile by tile), so a panel's weights stay in
// L1 across the band when they are small (the depthwise path).
template <int64_t kTilePixels, bool kPanelsOuter, typename MakeTileFn>
void ForEachBandTile(const ConvGeometry& g, const uint8_t* x_bytes, const PaddedImage& im,
                     int64_t panels, int threads, ThreadPool* pool, const MakeTileFn& make_tile) {
  const int64_t in_pixels = g.in_h * g.in_w, pixels = g.out_h * g.out_w;
  const int64_t tiles = CeilDiv(pixels, kTilePixels);
  const int64_t band_out_rows = std::max<int64_t>(
      1, (kBandBytes / std::max<int64_t>(1, im.row_bytes) - im.tap_rows) / g.stride_h + 1);
  const int64_t bands =
      BalancedBlocks(tiles, std::max<int64_t>(1, band_out_rows * g.out_w / kTilePixels), threads);
  const int64_t outer_items = g.batch * bands;
  int64_t panel_parts = 1;
  if (outer_items < threads) panel_parts = std::min(panels, CeilDiv(threads, outer_items));
  const int64_t panels_per_part = CeilDiv(panels, panel_parts);
  // Band `item`'s pixels and padded rows.
  auto band_of = [&](int64_t item) {
    ImageBand band;
    const int64_t b = item % bands;
    band.n = item / bands;
    band.p0 = BlockBegin(b, tiles, bands) * kTilePixels;
    band.p1 = std::min(pixels, BlockBegin(b + 1, tiles, bands) * kTilePixels);
    band.row0 = band.p0 / g.out_w * g.stride_h;
    band.row1 = (band.p1 - 1) / g.out_w * g.stride_h + im.tap_rows;
    return band;
  };
  ParallelFor(pool, outer_items * panel_parts, [&](int64_t t0, int64_t t1) {
    auto tile = make_tile();  // the thread's own tile function and state
    Scratch& sc = ThreadScratch();
    std::vector<uint8_t>& band_image = sc.band;
    std::vector<const uint8_t*>& bases = sc.band_bases;
    int64_t built_item = -1;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t part = t % panel_parts, item = t / panel_parts;
      const ImageBand band = band_of(item);
      const int64_t q0 = part * panels_per_part, q1 = std::min(panels, q0 + panels_per_part);
      const int64_t plane_stride = (band.row1 - band.row0) * im.padded_w * im.pixel_bytes;
      if (item != built_item) {
        band_image.resize((band.row1 - band.row0) * im.row_bytes);
        BuildBand(g, im, x_bytes + band.n * g.in_channels * in_pixels, band, plane_stride,
                  band_image.data());
        built_item = item;
      }
      // The next tile's pixel base positions (into plain pointers: through the
      // thread_local vectors GCC would fetch the TLS address on every access).
      const uint8_t* const image = band_image.data();
      int64_t oy = band.p0 / g.out_w, ox = band.p0 % g.out_w;
      auto next_bases = [&](int64_t count, const uint8_t** dst) {
        for (int64_t r = 0; r < kTilePixels; ++r) {
          dst[r] = image +
                   ((oy * g.stride_h - band.row0) * im.padded_w + ox * g.stride_w) * im.pixel_bytes;
          if (r + 1 < count && ++ox == g.out_w) ox = 0, ++oy;
        }
        if (count == kTilePixels && ++ox == g.out_w) ox = 0, ++oy;
      };
      if constexpr (kPanelsOuter) {
        const int64_t band_tiles = CeilDiv(band.p1 - band.p0, kTilePixels);
        bases.resize(band_tiles * kTilePixels);
        const uint8_t** const tile_bases = bases.data();
        for (int64_t i = 0; i < band_tiles; ++i) {
          next_bases(std::min(kTilePixels, pixels - band.p0 - i * kTilePixels),
                     tile_bases + i * kTilePixels);
        }
        for (int64_t q = q0; q < q1; ++q) {
          for (int64_t i = 0; i < band_tiles; ++i) {
            const int64_t p = band.p0 + i * kTilePixels;
            tile(tile_bases + i * kTilePixels, band.n, p, std::min(kTilePixels, pixels - p), q,
                 q + 1, plane_stride);
          }
        }
      } else {
        const uint8_t* tile_bases[kTilePixels];
        for (int64_t p = band.p0; p < band.p1; p += kTilePixels) {
          const int64_t count = std::min(kTilePixels, pixels - p);
          next_bases(count, tile_bases);
          tile(tile_bases, band.n, p, count, q0, q1, plane_stride);
        }
      }
    }
  });
}
#endif

// ---- gemm: im2col packed straight into the micro-kernel's B panels ----------

class GemmPath : public conv::Path {
 public:
  GemmPath(const ConvGeometry& shape, const Int8ConvOperand& w, int64_t k, bool zero_w_zero,
           Isa isa)
      : kernel_(KernelFor(isa, w.is_signed, zero_w_zero)), k_(k) {
    const int g_size = kernel_.k_group;
    k_groups_ = CeilDiv(k_, g_size);
    const int64_t out_per_group = shape.out_channels / shape.group;
    const int64_t value_bytes = gemm::ADomainBytes(kernel_.a_domain);
    packed_w_.resize(shape.out_channels * k_groups_ * g_size * value_bytes);
    row_neg_za_.resize(shape.out_channels);
    row_neg_sum_.resize(shape.out_channels);
    const auto* bytes = static_cast<const uint8_t*>(w.data);
    for (int64_t gi = 0; gi < shape.group; ++gi) {
      const int64_t o0 = gi * out_per_group;
      gemm::PackA(kernel_, bytes + o0 * k_, w.is_signed, k_, 0, out_per_group, k_,
                  packed_w_.data() + o0 * k_groups_ * g_size * value_bytes,
                  row_neg_sum_.data() + o0);
    }
    const int32_t sa = gemm::AShift(kernel_, w.is_signed);
    for (int64_t o = 0; o < shape.out_channels; ++o) {
      const int32_t zw = w.zero ? w.zero[w.zero_per_channel ? o : 0] : 0;
      row_neg_za_[o] = static_cast<int32_t>(0u - static_cast<uint32_t>(zw + sa));
      row_neg_sum_[o] = static_cast<int32_t>(0u - static_cast<uint32_t>(row_neg_sum_[o]));
      needs_col_sums_ |= row_neg_za_[o] != 0;
    }
  }

  const char* name() const override { return "gemm"; }

  void Run(const ConvGeometry& g, const Int8ConvOperand& x, const Epilogue& e, void* y,
           ThreadPool* pool) const override;

 private:
  // int8 weights with zero points 0 on the VNNI paths run as vpdpbusd's signed
  // operand against uint8 x (gemm_s8u8): sum w (x - zx) = sum w x - zx rowsum(w)
  // needs no column sums, the second term being a per-channel constant.
  static const MicroKernel& KernelFor(Isa isa, bool w_signed, bool zero_w_zero) {
    if (isa == Isa::kAvx512Vnni && zero_w_zero)
      return gemm::MicroKernelNamed("gemm_s8u8_8x32c4_avx512vnni");
    if (isa == Isa::kAvxVnni && zero_w_zero)
      return gemm::MicroKernelNamed("gemm_s8u8_6x16c4_avxvnni");
    return *PlanGemm(isa, w_signed).packed;
  }

  const MicroKernel& kernel_;
  int64_t k_ = 0;         // in_channels / group * kernel_h * kernel_w
  int64_t k_groups_ = 0;  // k_ in the kernel's groups
  // Per group, the packed weight panels (the kernel's A layout), and per output
  // channel -(w_zero in the A domain) and -(row sum of the stored weights).
  std::vector<uint8_t> packed_w_;
  std::vector<int32_t> row_neg_za_, row_neg_sum_;
  bool needs_col_sums_ = false;  // some w_zero' != 0: the correction needs x's column sums
};

void GemmPath::Run(const ConvGeometry& g, const Int8ConvOperand& x, const Epilogue& e, void* y,
                   ThreadPool* pool) const {
  const MicroKernel& kernel = kernel_;
  const int mr = kernel.mr, nr = kernel.nr, g_size = kernel.k_group;
  const int64_t value_bytes = gemm::ADomainBytes(kernel.a_domain);
  const int64_t pixels = g.out_h * g.out_w, in_plane = g.in_h * g.in_w;
  const int64_t in_per_group = g.in_channels / g.group, out_per_group = g.out_channels / g.group;
  const int64_t kg = k_groups_;

  // Pixel blocks of whole nr-column panels; with fewer (batch, group, pixel
  // block) items than threads, the output channels are split too (each part
  // packs the block again, so one thread never splits).
  const int threads = SplitThreads(g, k_, pool);
  const int64_t fit = kPackBytes / std::max<int64_t>(1, kg * g_size) / nr;
  const int64_t pixel_panels = CeilDiv(pixels, nr);
  const int64_t pixel_blocks =
      BalancedBlocks(pixel_panels, std::clamp<int64_t>(fit, 1, kMaxBlockPixels / nr), threads);
  const int64_t outer_items = g.batch * g.group * pixel_blocks;
  int64_t block_rows = out_per_group;
  if (outer_items < threads) {
    const int64_t parts = CeilDiv(threads, outer_items);
    block_rows = std::max<int64_t>(mr, CeilDiv(CeilDiv(out_per_group, parts), mr) * mr);
  }
  const int64_t row_blocks = std::max<int64_t>(1, CeilDiv(out_per_group, block_rows));

  // The B domain (the kernel's): int8 (uint8 x stored as x - 128) or uint8
  // (int8 x stored as x + 128); zb is the x zero point in it and pads the image.
  const bool unsigned_b = kernel.b_domain == gemm::BDomain::kUnsigned8;
  const uint8_t flip = x.is_signed == unsigned_b ? 0x80 : 0;
  const int32_t zb = (x.zero ? x.zero[0] : 0) + gemm::BShift(kernel, x.is_signed);
  // Without column sums the correction is -zb rowsum(w) per channel: the tiles'
  // per-tensor form with zero column offsets and these row offsets.
  RunScratch& run = ThreadRunScratch();
  if (!needs_col_sums_) {
    run.row_offset.resize(g.out_channels);
    for (int64_t o = 0; o < g.out_channels; ++o)
      run.row_offset[o] =
          static_cast<int32_t>(static_cast<uint32_t>(row_neg_sum_[o]) * static_cast<uint32_t>(zb));
    run.zeros.assign(nr, 0);
  }
  const auto* x_bytes = static_cast<const uint8_t*>(x.data);
  const uint8_t* packed_w = packed_w_.data();
  const int64_t out_size = e.element_size();
  auto* const y_bytes = static_cast<uint8_t*>(y);
#if defined(__x86_64__) || defined(_M_X64)
  const bool vnni = kernel.isa == Isa::kAvx512Vnni;  // the packer's AVX-512 VNNI form
  const auto pack = vnni                         ? conv::PackIm2colAvx512Vnni
                    : kernel.isa != Isa::kScalar ? conv::PackIm2colAvx2
                                                 : conv::PackIm2col;
  // The shifted-run packers read phase planes: AVX-512 VNNI's, and the AVX2 one of the
  // paired words and AVX-VNNI's 4-byte groups when no column sums are needed.
  const bool avx2_shifted = kernel.isa != Isa::kScalar && !vnni &&
                            conv::UsesAvx2ShiftedRuns(g_size, nr, kernel.b_paired, needs_col_sums_);
  const bool phase_planes = (vnni || avx2_shifted) && conv::UsesPhasePlanes(g);
  const auto build_planes = vnni ? conv::BuildPhasePlanesAvx512Vnni : conv::BuildPhasePlanesAvx2;
  // Requantized unsigned-B runs on AVX-512 VNNI whose x panel (nr x k bytes) fits L1 take the
  // requantizing tile (conv_pack.h RequantTile) over all of k.
  const bool requant_tiles = vnni && unsigned_b && e.is_8bit() && k_ <= kRequantTileMaxK;
  conv::RequantTile requant_proto;
  if (requant_tiles) {
    requant_proto.requant = ChannelRequantFor(
        e, g.out_channels, g.out_channels,
        [&](int64_t o) { return !needs_col_sums_ ? run.row_offset[o] : 0; }, run);
    requant_proto.k_groups = kg;
    requant_proto.ld = pixels;
  }
#else
  const auto pack = conv::PackIm2col;
#endif

  ParallelFor(pool, outer_items * row_blocks, [&](int64_t t0, int64_t t1) {
    Scratch& sc = ThreadScratch();
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t rb = t % row_blocks, item = t / row_blocks;
      const int64_t pb = item % pixel_blocks, ng = item / pixel_blocks;
      const int64_t gi = ng % g.group, n = ng / g.group;
      const int64_t p0 = BlockBegin(pb, pixel_panels, pixel_blocks) * nr;
      const int64_t count =
          std::min(pixels, BlockBegin(pb + 1, pixel_panels, pixel_blocks) * nr) - p0;
      const int64_t cols = CeilDiv(count, nr) * nr, panels = cols / nr;
      const int64_t m0 = rb * block_rows, m1 = std::min(out_per_group, m0 + block_rows);

      // Pack the block's im2col columns (k = (c, ky, kx), as in w) with their sums.
      sc.packed_b.resize(kg * g_size * cols);
      sc.rows.resize(g_size * cols);
      sc.col_sum.resize(cols);
      auto* packed_b = reinterpret_cast<int8_t*>(sc.packed_b.data());
      conv::Im2colBlock block{&g,    x_bytes + (n * g.in_channels + gi * in_per_group) * in_plane,
                              k_,    p0,
                              count, cols,
                              nr,    g_size,
                              flip,  static_cast<int8_t>(zb)};
      block.paired = kernel.b_paired;
#if defined(__x86_64__) || defined(_M_X64)
      if (phase_planes) {
        sc.phases.resize(in_per_group * g.stride_h * g.stride_w * conv::PhasePlaneSize(g));
        build_planes(g, block.x_group, in_per_group, p0, count, sc.phases.data());
        block.phases = sc.phases.data();
      }
#endif
      if (!needs_col_sums_) {
        pack(block, sc.rows.data(), packed_b, nullptr);
      } else {
        pack(block, sc.rows.data(), packed_b, sc.col_sum.data());
        sc.col_term.resize(cols);
        sc.col_zb.assign(cols, zb);
        for (int64_t j = 0; j < cols; ++j) {
          sc.col_term[j] =
              static_cast<int32_t>(static_cast<uint32_t>(sc.col_sum[j]) -
                                   static_cast<uint32_t>(k_) * static_cast<uint32_t>(zb));
        }
      }

      const int64_t o_base = gi * out_per_group;
      uint8_t* const y_block = y_bytes + ((n * g.out_channels + o_base) * pixels + p0) * out_size;
#if defined(__x86_64__) || defined(_M_X64)
      if (requant_tiles) {
        // Each x panel stays in L1 while the weight panels stream past it.
        conv::RequantTile tile_args = requant_proto;
        for (int64_t q = 0; q < panels; ++q) {
          tile_args.b = sc.packed_b.data() + q * kg * nr * g_size;
          tile_args.count = std::min<int64_t>(nr, count - q * nr);
          for (int64_t m = m0; m < m1; m += mr) {
            const int rows = static_cast<int>(std::min<int64_t>(mr, out_per_group - m));
            tile_args.a = packed_w + (o_base + m) * kg * g_size;
            tile_args.requant.bias = requant_proto.requant.bias + o_base + m;
            tile_args.requant.multipliers = requant_proto.requant.multipliers + o_base + m;
            tile_args.y = y_block + m * pixels + q * nr;
            conv::RequantTileAvx512Vnni(rows, tile_args);
          }
        }
        continue;
      }
#endif
      // Rows m0..m1 of the group x cols = W_group * packed block, a chunk of
      // rows at a time, their partial sums between k blocks kept in L1.
      const int64_t kc_max = std::max<int64_t>(1, kBPanelBytes / (nr * g_size));
      const int64_t kc =
          std::max<int64_t>(1, CeilDiv(kg, std::max<int64_t>(1, CeilDiv(kg, kc_max))));
      const int64_t chunk_rows =
          kg <= kc ? m1 - m0 : std::max<int64_t>(mr, kAccChunkBytes / (cols * 4) / mr * mr);
      if (kg > kc) sc.partial.resize(std::min(chunk_rows, m1 - m0) * cols);
      for (int64_t c0 = m0; c0 < m1; c0 += chunk_rows) {
        const int64_t c1 = std::min(m1, c0 + chunk_rows);
        for (int64_t g0 = 0; g0 < std::max<int64_t>(kg, 1); g0 += kc) {
          const int64_t groups = std::min(kc, kg - g0);
          const bool first = g0 == 0, last = g0 + kc >= kg;
          // One TileArgs for the k block, its per-tile fields set per tile.
          TileArgs args;
          args.k_groups = groups;
          args.accumulate = !first;
          args.last = last;
          if (kg > kc) args.partial_ld = cols;
          if (last) {
            if (!needs_col_sums_) args.col_offset = run.zeros.data();
            args.epilogue = &e;
            args.ld_out = pixels;
          }
          for (int64_t q = 0; q < panels; ++q) {
            for (int64_t m = c0; m < c1; m += mr) {
              const int rows = static_cast<int>(std::min<int64_t>(mr, out_per_group - m));
              const int64_t o = o_base + m;
              args.a = packed_w + (o * kg + g0 * rows) * g_size * value_bytes;
              args.b = packed_b + (q * kg + g0) * nr * g_size;
              if (kg > kc) args.partial = sc.partial.data() + (m - c0) * cols + q * nr;
              if (last) {
                args.row_neg_sum = row_neg_sum_.data() + o;  // the paired kernels' too
                if (needs_col_sums_) {
                  args.row_neg_za = row_neg_za_.data() + o;
                  args.col_term = sc.col_term.data() + q * nr;
                  args.col_zb = sc.col_zb.data() + q * nr;
                } else {
                  args.row_offset = run.row_offset.data() + o;
                }
                args.row0 = o;
                args.col0 = p0 + q * nr;
                args.out = y_block + (m * pixels + q * nr) * out_size;
                args.cols = static_cast<int>(std::min<int64_t>(nr, count - q * nr));
              }
              kernel.tile(rows, args);
            }
          }
        }
      }
    }
  });
}

// ---- depthwise: a direct plane kernel per channel --------------------------

class DepthwisePath : public conv::Path {
 public:
  DepthwisePath(const ConvGeometry& shape, const Int8ConvOperand& w, Isa isa) : isa_(isa) {
    const int64_t taps = shape.kernel_h * shape.kernel_w;
    const auto* bytes = static_cast<const uint8_t*>(w.data);
    taps_.resize(shape.out_channels * taps);
    for (int64_t o = 0; o < shape.out_channels; ++o) {
      const int32_t zw = w.zero ? w.zero[w.zero_per_channel ? o : 0] : 0;
      for (int64_t t = 0; t < taps; ++t) {
        const uint8_t b = bytes[o * taps + t];
        taps_[o * taps + t] = (w.is_signed ? static_cast<int8_t>(b) : b) - zw;
      }
    }
  }

  const char* name() const override { return "depthwise"; }

  void Run(const ConvGeometry& g, const Int8ConvOperand& x, const Epilogue& e, void* y,
           ThreadPool* pool) const override {
    const int64_t pixels = g.out_h * g.out_w, in_plane = g.in_h * g.in_w;
    const int64_t out_per_group = g.out_channels / g.group, taps = g.kernel_h * g.kernel_w;
    const int64_t phase_len = conv::DepthwisePhaseLength(g), row_len = g.stride_w * phase_len;
    const int32_t x_zero = x.zero ? x.zero[0] : 0;
    const auto* x_bytes = static_cast<const uint8_t*>(x.data);
    std::vector<int64_t> tap_offsets(g.kernel_w);
    conv::DepthwiseTapOffsets(g, phase_len, tap_offsets.data());
    auto build_plane = conv::BuildDepthwisePlane;
    auto channel_fn = conv::DepthwiseChannelScalar;
#if defined(__x86_64__) || defined(_M_X64)
    if (isa_ == Isa::kAvx512Vnni) {
      build_plane = conv::BuildDepthwisePlaneAvx512;
      channel_fn = conv::DepthwiseChannelAvx512Vnni;
    } else if (isa_ != Isa::kScalar) {
      build_plane = conv::BuildDepthwisePlaneAvx2;
      channel_fn = conv::DepthwiseChannelAvx2;
    }
#endif
    // The vector kernels read every tap row: the plane gets zero rows around it.
    const bool padded = channel_fn != conv::DepthwiseChannelScalar;
    const epilogue::RowFn finish_row = epilogue::RowFnFor(isa_);
    const int64_t out_size = e.element_size();
    auto* const y_bytes = static_cast<uint8_t*>(y);
    // Output rows are computed in bands of about kAccChunkBytes of accumulators,
    // each finished while in L1.
    const int64_t band_rows = std::clamp<int64_t>(kAccChunkBytes / (4 * g.out_w), 1, g.out_h);
    // One item per (batch, input channel): its plane serves each of its output channels.
    ParallelFor(pool, g.batch * g.group, [&](int64_t t0, int64_t t1) {
      Scratch& sc = ThreadScratch();
      // The plane's rows follow `padding.top` zero rows and precede `padding.bottom`.
      const conv::DepthwisePaddingRows padding =
          padded ? conv::DepthwisePadding(g) : conv::DepthwisePaddingRows{0, 0};
      sc.plane.resize((padding.top + g.in_h + padding.bottom) * row_len);
      int32_t* plane_rows = sc.plane.data() + padding.top * row_len;
      std::fill_n(sc.plane.data(), padding.top * row_len, 0);
      std::fill_n(plane_rows + g.in_h * row_len, padding.bottom * row_len, 0);
      sc.acc.resize(band_rows * g.out_w);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / g.group, c = t % g.group;
        build_plane(g, x_bytes + (n * g.in_channels + c) * in_plane, x.is_signed, x_zero,
                    plane_rows);
        const conv::DepthwisePlane plane{plane_rows, row_len, phase_len, tap_offsets.data()};
        for (int64_t j = 0; j < out_per_group; ++j) {
          const int64_t o = c * out_per_group + j;
          for (int64_t oy = 0; oy < g.out_h; oy += band_rows) {
            const int64_t rows = std::min(band_rows, g.out_h - oy);
            channel_fn(g, plane, taps_.data() + o * taps, oy, oy + rows, sc.acc.data());
            finish_row(e, sc.acc.data(), o, oy * g.out_w, rows * g.out_w,
                       y_bytes + ((n * g.out_channels + o) * pixels + oy * g.out_w) * out_size);
          }
        }
      }
    });
  }

 private:
  Isa isa_;
  std::vector<int32_t> taps_;  // w - w_zero per output channel and tap
};

#if defined(__x86_64__) || defined(_M_X64)

// ---- indirect: NHWC bands, an indirect micro-kernel (AVX-512 VNNI) ----------

class IndirectPath : public conv::Path {
 public:
  IndirectPath(const ConvGeometry& shape, const Int8ConvOperand& w, int64_t k)
      : k_(k),
        w_(conv::PackIndirectWeights(static_cast<const int8_t*>(w.data), shape.out_channels,
                                     shape.in_channels, shape.kernel_h * shape.kernel_w)) {}

  const char* name() const override { return "indirect"; }

  void Run(const ConvGeometry& g, const Int8ConvOperand& x, const Epilogue& e, void* y,
           ThreadPool* pool) const override {
    const conv::IndirectWeights& iw = w_;
    const int64_t cp = iw.cp, width = iw.panel_width, pixels = g.out_h * g.out_w;
    const PaddedImage im = PaddedImageFor(g, x, cp, cp);
    RunScratch& run = ThreadRunScratch();

    // The runs of contiguous input bytes of one output pixel: one per kernel
    // row (its kernel_w taps are adjacent) when dilation_w is 1, else one per tap.
    std::vector<int64_t>& run_offsets = run.run_offsets;
    run_offsets.clear();
    for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
      for (int64_t kx = 0; kx < (g.dilation_w == 1 ? 1 : g.kernel_w); ++kx)
        run_offsets.push_back(ky * g.dilation_h * im.row_bytes + kx * g.dilation_w * cp);
    }
    conv::IndirectTile proto;
    // The sums are sum w * x': the bias absorbs -zb * colsum(w). The panels'
    // padding channels and the 8 more a last half vector reads are 0.
    proto.requant = ChannelRequantFor(
        e, g.out_channels, iw.panels * width + 8,
        [&](int64_t o) {
          return static_cast<int32_t>(0u - static_cast<uint32_t>(im.zb) *
                                               static_cast<uint32_t>(iw.col_sum[o]));
        },
        run);
    proto.run_offsets = run_offsets.data();
    proto.runs = static_cast<int64_t>(run_offsets.size());
    proto.run_groups = (g.dilation_w == 1 ? g.kernel_w : 1) * cp / 4;
    proto.ld = pixels;
    const int64_t out_size = e.element_size();
    auto* const y_bytes = static_cast<uint8_t*>(y);
    ForEachBandTile<conv::kIndirectPixels, false>(
        g, static_cast<const uint8_t*>(x.data), im, iw.panels, SplitThreads(g, k_, pool), pool,
        [&] {
          return [&, tile = proto](const uint8_t* const* base, int64_t n, int64_t p, int64_t count,
                                   int64_t q0, int64_t q1, int64_t) mutable {
            tile.pixels = base;
            tile.count = count;
            for (int64_t q = q0; q < q1; ++q) {
              const int64_t o = q * width;
              tile.w = iw.packed.data() + q * g.kernel_h * g.kernel_w * cp * width;
              tile.requant.bias = proto.requant.bias + o;
              if (proto.requant.multipliers)
                tile.requant.multipliers = proto.requant.multipliers + o;
              tile.y = y_bytes + ((n * g.out_channels + o) * pixels + p) * out_size;
              tile.channels = std::min(width, g.out_channels - o);
              conv::IndirectTileAvx512Vnni(width, tile);
            }
          };
        });
  }

 private:
  int64_t k_;
  conv::IndirectWeights w_;
};

// ---- depthwise_vector: 16 channels per vector (AVX-512 VNNI) ----------------

class DepthwiseVectorPath : public conv::Path {
 public:
  DepthwiseVectorPath(const ConvGeometry& shape, const Int8ConvOperand& w, int64_t k, Isa isa)
      : k_(k),
        w_(conv::PackDepthwiseVectorWeights(static_cast<const int8_t*>(w.data), shape.out_channels,
                                            shape.kernel_h * shape.kernel_w)),
        int32_path_(shape, w, isa) {}

  const char* name() const override { return "depthwise_vector"; }

  void Run(const ConvGeometry& g, const Int8ConvOperand& x, const Epilogue& e, void* y,
           ThreadPool* pool) const override {
    if (!e.is_8bit()) return int32_path_.Run(g, x, e, y, pool);
    const conv::DepthwiseVectorWeights& dw = w_;
    const int64_t pixels = g.out_h * g.out_w, taps = g.kernel_h * g.kernel_w, blocks = dw.cp / 16;
    const PaddedImage im = PaddedImageFor(g, x, dw.cp, 16);
    RunScratch& run = ThreadRunScratch();
    std::vector<int64_t>& tap_offsets = run.run_offsets;
    tap_offsets.clear();
    for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
      for (int64_t kx = 0; kx < g.kernel_w; ++kx)
        tap_offsets.push_back((ky * g.dilation_h * im.padded_w + kx * g.dilation_w) * 16);
    }
    conv::DepthwiseVectorTile proto;
    proto.requant = ChannelRequantFor(
        e, g.out_channels, dw.cp,
        [&](int64_t o) {
          return static_cast<int32_t>(0u - static_cast<uint32_t>(im.zb) *
                                               static_cast<uint32_t>(dw.col_sum[o]));
        },
        run);
    proto.tap_offsets = tap_offsets.data();
    proto.taps = taps;
    proto.ld = pixels;
    auto* const y_bytes = static_cast<uint8_t*>(y);
    ForEachBandTile<conv::kDepthwiseVectorPixels, true>(
        g, static_cast<const uint8_t*>(x.data), im, blocks, SplitThreads(g, k_, pool), pool, [&] {
          return [&, tile = proto](const uint8_t* const* base, int64_t n, int64_t p, int64_t count,
                                   int64_t q0, int64_t q1, int64_t plane_stride) mutable {
            tile.pixels = base;
            tile.count = count;
            for (int64_t q = q0; q < q1; ++q) {
              const int64_t c = 16 * q;
              tile.pixel_offset = q * plane_stride;
              tile.w = dw.packed.data() + q * taps * 4 * 64;
              tile.requant.bias = proto.requant.bias + c;
              tile.requant.multipliers = proto.requant.multipliers + c;
              tile.y = y_bytes + (n * g.out_channels + c) * pixels + p;
              tile.channels = std::min<int64_t>(16, g.out_channels - c);
              conv::DepthwiseVectorTileAvx512Vnni(tile);
            }
          };
        });
  }

 private:
  int64_t k_;
  conv::DepthwiseVectorWeights w_;
  DepthwisePath int32_path_;  // int32 outputs (ConvInteger)
};

#endif

}  // namespace

Int8Conv::Int8Conv(const ConvGeometry& shape, const Int8ConvOperand& w, Isa isa) : shape_(shape) {
  OCTET_CHECK(shape.group >= 1 && shape.in_channels % shape.group == 0 &&
                  shape.out_channels % shape.group == 0,
              "int8 convolution: group ", shape.group, " does not divide in_channels ",
              shape.in_channels, " and out_channels ", shape.out_channels);
  OCTET_CHECK(IsaSupported(isa), "int8 convolution: instruction set ", IsaName(isa),
              " cannot run here: ", IsaUnsupportedReason(isa));
  const int64_t in_per_group = shape.in_channels / shape.group;
  const int64_t out_per_group = shape.out_channels / shape.group;
  const int64_t taps = shape.kernel_h * shape.kernel_w;
  const int64_t k = in_per_group * taps;
  OCTET_CHECK(k <= kGemmMaxK, "int8 convolution: ", in_per_group, " input channels x ", taps,
              " kernel taps = ", k, " products per output exceed ", kGemmMaxK,
              ", the largest count whose int32 accumulation is exact for all 8-bit inputs");
  // int8 weights whose zero points are all 0 (the AVX-512 VNNI paths).
  bool zero_w_zero = w.is_signed;
  for (int64_t o = 0; o < shape.out_channels && zero_w_zero; ++o)
    zero_w_zero = (w.zero ? w.zero[w.zero_per_channel ? o : 0] : 0) == 0;
  const bool vnni = isa == Isa::kAvx512Vnni && zero_w_zero;
#if defined(__x86_64__) || defined(_M_X64)
  if (in_per_group == 1 && vnni && out_per_group == 1) {
    path_ = std::make_unique<DepthwiseVectorPath>(shape, w, k, isa);
    return;
  }
  if (in_per_group > 1 && vnni && shape.group == 1 && taps > 1) {
    path_ = std::make_unique<IndirectPath>(shape, w, k);
    return;
  }
#else
  (void)vnni, (void)out_per_group;
#endif
  if (in_per_group == 1) {
    path_ = std::make_unique<DepthwisePath>(shape, w, isa);
  } else {
    path_ = std::make_unique<GemmPath>(shape, w, k, zero_w_zero, isa);
  }
}

Int8Conv::~Int8Conv() = default;

const char* Int8Conv::path_name() const { return path_->name(); }

void Int8Conv::Run(const ConvGeometry& g, const Int8ConvOperand& x, const Epilogue& e, void* y,
                   ThreadPool* pool) const {
  OCTET_CHECK(g.out_channels == shape_.out_channels && g.in_channels == shape_.in_channels &&
                  g.group == shape_.group && g.kernel_h == shape_.kernel_h &&
                  g.kernel_w == shape_.kernel_w,
              "int8 convolution: run geometry (", g.out_channels, " x ", g.in_channels, "/",
              g.group, " x ", g.kernel_h, "x", g.kernel_w, ") differs from the packed weights (",
              shape_.out_channels, " x ", shape_.in_channels, "/", shape_.group, " x ",
              shape_.kernel_h, "x", shape_.kernel_w, ")");
  OCTET_CHECK(!x.zero_per_channel, "int8 convolution: x zero point must be per tensor");
  const int32_t x_zero = x.zero ? x.zero[0] : 0;
  OCTET_CHECK(x_zero >= (x.is_signed ? -128 : 0) && x_zero <= (x.is_signed ? 127 : 255),
              "int8 convolution: x zero point ", x_zero, " is outside the ",
              x.is_signed ? "int8" : "uint8", " range");
  if (g.batch == 0 || g.out_channels == 0 || g.out_h * g.out_w == 0) return;
  CheckEpilogue(e, "int8 convolution");
  OCTET_CHECK(!e.bias.per_column && !e.multiplier.per_column && !e.float_bias.per_column &&
                  !e.bias.row_index && !e.multiplier.row_index,
              "internal: int8 convolution epilogues take per-channel or per-tensor operands");
  OCTET_CHECK(x.data != nullptr || g.in_channels * g.in_h * g.in_w == 0,
              "int8 convolution: x data is null");
  OCTET_CHECK(y != nullptr, "int8 convolution: the output is null");
  path_->Run(g, x, e, y, pool);
}

}  // namespace octet
