// The `octet` command line: run a model on .npy/.npz inputs and print or save
// its outputs. NPY and (uncompressed) NPZ are read and written here directly,
// so the CLI needs nothing beyond the engine.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/npy.h"
#include "core/error.h"
#include "core/float_types.h"
#include "core/memory_limit.h"
#include "core/tensor.h"
#include "runtime/introspect.h"
#include "runtime/session.h"

namespace octet {
namespace {

constexpr const char* kMainHelp =
    R"(usage: octet [--help] <command> [<args>]

octet runs quantized ONNX models on the CPU with exact integer arithmetic.

commands:
  run       run a model on inputs from .npy/.npz files and print or save its outputs
  list-ops  list every operator octet has a kernel for: domain, op, opset range
  inspect   list the quantized groups octet fuses into integer kernels, and the
            ones it refuses with the reason
  bench     time a model in octet, and with --vs-ort in ONNX Runtime side by side;
            operator times, fused/refused groups, an optional HTML report
  compare   run octet and ONNX Runtime (or the float model) keeping every
            intermediate tensor; list the first tensors that differ, and why
  generate  greedy text generation with a decoder language model (KV cache),
            printing prefill and decode ms/token

bench, compare and generate are Python: the octet command that `pip install`
makes runs them (and this binary for the others).
Run 'octet <command> --help' for the options of a command.
)";

constexpr const char* kRunHelp =
    R"(usage: octet run MODEL [--input NAME=FILE.npy]... [--input FILE.npz]
                 [--output OUT.npz | OUT.npy] [--threads N] [--max-tensor-bytes N]

Runs MODEL (an .onnx file) once and prints, for each output, its name, dtype,
shape and first values.

options:
  --input NAME=FILE.npy  feed graph input NAME from a .npy file (repeat per input)
  --input FILE.npz       feed every array of an .npz file (np.savez, uncompressed)
                         to the graph input named like its key
  --output OUT.npz       also write all outputs to OUT.npz (uncompressed, keys are
                         the output names); OUT.npy writes a model's only output
  --threads N            worker threads (default 1; 0 = one per core); results do
                         not depend on N
  --max-tensor-bytes N   refuse any tensor larger than N bytes (K, M, G, T suffixes:
                         powers of 1024; default OCTET_MAX_TENSOR_BYTES, else a
                         quarter of physical memory)
  -h, --help             show this help

Every graph input must be fed with exactly the model's dtype (no casting).
bfloat16 / float8 / int4 / uint4 inputs are read from ml_dtypes arrays saved with
np.save; outputs of those types are written as their raw bits (uint16 / uint8)
or, for int4 / uint4, as int8 / uint8 values.
Exit status: 0 on success, 1 when the run fails, 2 on a usage error.
)";

constexpr const char* kInspectHelp =
    R"(usage: octet inspect MODEL

Loads MODEL and prints what a session's graph rewrites do with it (products
of one input merged into one node included), one line per group in the order
the rewrites met them:
  fused   <op> '<node>' -> <what it became>
  refused <op> '<node>' why=<reason>
then a summary line qdq_groups=<n> claimed=<n>. Nothing is run. With
OCTET_QDQ=0 in the environment the rewrites are off, and it says so.

options:
  -h, --help   show this help
)";

// A usage error (exit status 2) as opposed to a failed run (1).
class UsageError : public Error {
 public:
  using Error::Error;
};

// ---------------------------------------------------------------- files

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot open '", path, "': ", std::strerror(errno));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) Fail("cannot write '", path, "': ", std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) Fail("failed writing '", path, "'");
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// ---------------------------------------------------------------- summary

std::string ElementToString(const Tensor& t, int64_t i) {
  std::ostringstream os;
  os.precision(6);
  switch (t.dtype()) {
    case DType::kFloat32:
      os << t.data<float>()[i];
      break;
    case DType::kFloat64:
      os << t.data<double>()[i];
      break;
    case DType::kFloat16:
      os << Float16BitsToFloat(t.data<uint16_t>()[i]);
      break;
    case DType::kBFloat16:
      os << BFloat16BitsToFloat(t.data<uint16_t>()[i]);
      break;
    case DType::kBool:
      os << (t.data<bool>()[i] ? "true" : "false");
      break;
    case DType::kInt8:
    case DType::kInt4:
      os << int{t.data<int8_t>()[i]};
      break;
    case DType::kUInt8:
    case DType::kUInt4:
      os << int{t.data<uint8_t>()[i]};
      break;
    case DType::kInt16:
      os << t.data<int16_t>()[i];
      break;
    case DType::kUInt16:
      os << t.data<uint16_t>()[i];
      break;
    case DType::kInt32:
      os << t.data<int32_t>()[i];
      break;
    case DType::kUInt32:
      os << t.data<uint32_t>()[i];
      break;
    case DType::kInt64:
      os << t.data<int64_t>()[i];
      break;
    case DType::kUInt64:
      os << t.data<uint64_t>()[i];
      break;
    default:  // float8: show the bits rather than decode four formats here
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", static_cast<const uint8_t*>(t.raw())[i]);
      os << hex;
  }
  return os.str();
}

std::string Summary(const std::string& name, const Tensor& t) {
  constexpr int64_t kShown = 8;
  std::string s = name + ": " + DTypeName(t.dtype()) + " " + ShapeToString(t.shape()) + " [";
  for (int64_t i = 0; i < std::min(t.numel(), kShown); ++i)
    s += (i ? ", " : "") + ElementToString(t, i);
  if (t.numel() > kShown) s += ", ...";
  return s + "]";
}

// ---------------------------------------------------------------- commands

int RunCommand(const std::vector<std::string>& args) {
  std::string model_path, output_path;
  std::vector<std::string> input_specs;
  SessionOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError("option " + arg + " needs a value");
      return args[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::cout << kRunHelp;
      return 0;
    } else if (arg == "--input") {
      input_specs.push_back(value());
    } else if (arg == "--output") {
      output_path = value();
    } else if (arg == "--threads") {
      const std::string& v = value();
      try {
        size_t used = 0;
        options.threads = std::stoi(v, &used);
        if (used != v.size() || options.threads < 0) throw std::invalid_argument(v);
      } catch (const std::exception&) {
        throw UsageError("--threads needs a non-negative integer, got '" + v + "'");
      }
    } else if (arg == "--max-tensor-bytes") {
      const std::string& v = value();
      try {
        options.max_tensor_bytes = ParseByteSize(v, "--max-tensor-bytes");
      } catch (const Error& e) {
        throw UsageError(e.what());
      }
    } else if (!arg.empty() && arg[0] == '-') {
      throw UsageError("unknown option '" + arg + "' for 'octet run' (see octet run --help)");
    } else if (model_path.empty()) {
      model_path = arg;
    } else {
      throw UsageError("unexpected argument '" + arg + "' (the model is '" + model_path + "')");
    }
  }
  if (model_path.empty()) throw UsageError("octet run needs a MODEL (see octet run --help)");
  if (!output_path.empty() && !EndsWith(output_path, ".npz") && !EndsWith(output_path, ".npy"))
    throw UsageError("--output must name a .npz or .npy file, got '" + output_path + "'");

  auto session = InferenceSession::FromFile(model_path, options);
  auto declared_type = [&](const std::string& name) {
    std::string names;
    for (const TensorInfo& info : session->inputs()) {
      if (info.name == name) return info.dtype;
      names += (names.empty() ? "" : ", ") + info.name;
    }
    Fail("unknown input name '", name, "'; the model's inputs are: ", names);
  };

  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const std::string& spec : input_specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) {
      if (!EndsWith(spec, ".npz"))
        throw UsageError("--input takes NAME=FILE.npy or FILE.npz, got '" + spec + "'");
      for (auto& [key, bytes] : ReadNpz(ReadFile(spec), spec)) {
        const std::string where = spec + " entry '" + key + "'";
        feeds.emplace_back(key, ReadNpy(bytes, declared_type(key), where));
      }
    } else {
      const std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
      if (name.empty() || file.empty())
        throw UsageError("--input takes NAME=FILE.npy, got '" + spec + "'");
      if (EndsWith(file, ".npz"))
        throw UsageError("--input " + spec +
                         ": an .npz feeds inputs by its keys; pass it as --input " + file);
      feeds.emplace_back(name, ReadNpy(ReadFile(file), declared_type(name), file));
    }
  }

  std::vector<Tensor> outputs = session->Run(feeds);
  const auto& infos = session->outputs();
  for (size_t i = 0; i < outputs.size(); ++i)
    std::cout << Summary(infos[i].name, outputs[i]) << "\n";

  if (EndsWith(output_path, ".npy")) {
    OCTET_CHECK(outputs.size() == 1, "--output ", output_path, ": the model has ", outputs.size(),
                " outputs; write them to an .npz instead");
    WriteFile(output_path, SerializeNpy(outputs[0]));
  } else if (!output_path.empty()) {
    std::vector<std::pair<std::string, std::string>> entries;
    for (size_t i = 0; i < outputs.size(); ++i)
      entries.emplace_back(infos[i].name, SerializeNpy(outputs[i]));
    WriteFile(output_path, WriteNpz(entries));
  }
  if (!output_path.empty()) std::cout << "wrote " << output_path << "\n";
  return 0;
}

int InspectCommand(const std::vector<std::string>& args) {
  std::string model_path;
  for (const std::string& arg : args) {
    if (arg == "-h" || arg == "--help") {
      std::cout << kInspectHelp;
      return 0;
    }
    if (!arg.empty() && arg[0] == '-')
      throw UsageError("unknown option '" + arg +
                       "' for 'octet inspect' (see octet inspect --help)");
    if (!model_path.empty())
      throw UsageError("unexpected argument '" + arg + "' (the model is '" + model_path + "')");
    model_path = arg;
  }
  if (model_path.empty())
    throw UsageError("octet inspect needs a MODEL (see octet inspect --help)");
  std::cout << DescribeModelRewrites(model_path);
  return 0;
}

// One line per (domain, op, opset range): "ai.onnx QuantizeLinear 21-22".
// Internal ops made by the rewrites (domain "octet") are included and marked.
int ListOpsCommand(const std::vector<std::string>& args) {
  if (!args.empty()) {
    if (args[0] != "-h" && args[0] != "--help")
      throw UsageError("octet list-ops takes no arguments (see octet --help)");
    std::cout << "usage: octet list-ops\n\nPrints one line per kernel: DOMAIN OP OPSETS.\n";
    return 0;
  }
  std::set<std::string> lines;
  for (const KernelInfo& d : RegisteredKernels()) {
    std::string range = std::to_string(d.since_version);
    if (d.end_version >= (1 << 30)) {
      range += "+";
    } else {
      range += "-";
      range += std::to_string(d.end_version);
    }
    lines.insert(d.domain + " " + d.op_type + " " + range);
  }
  for (const std::string& line : lines) std::cout << line << "\n";
  return 0;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) throw UsageError("missing command (see octet --help)");
  if (args[0] == "-h" || args[0] == "--help") {
    std::cout << kMainHelp;
    return 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "run") return RunCommand(rest);
  if (args[0] == "inspect") return InspectCommand(rest);
  if (args[0] == "list-ops") return ListOpsCommand(rest);
  if (args[0] == "bench" || args[0] == "compare" || args[0] == "generate")
    throw UsageError("'octet " + args[0] +
                     "' is Python: run it with the octet command that `pip install` makes "
                     "(this binary runs run, inspect and list-ops)");
  throw UsageError("unknown command '" + args[0] + "' (see octet --help)");
}

}  // namespace
}  // namespace octet

int main(int argc, char** argv) {
  try {
    return octet::Main(argc, argv);
  } catch (const octet::UsageError& e) {
    std::cerr << "octet: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "octet: error: " << e.what() << "\n";
    return 1;
  }
}
