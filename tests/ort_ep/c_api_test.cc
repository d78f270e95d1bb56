// liboctet_ep.so through ONNX Runtime's C API alone, as a C or C++ application would use
// it (tests/python/test_ort_ep.py runs it): load libonnxruntime, register the library,
// find its device, open two sessions on it at once, run a QDQ group and compare with the
// expected bytes, check that a bad option fails session creation with octet's message,
// release everything, unregister, register again and run again.
//
//   octet_ep_c_api_test LIBONNXRUNTIME LIBOCTET_EP MODEL X.bin Y.bin M K N
//   (x: uint8 [M, K], y: uint8 [M, N], both raw bytes)
#include <dlfcn.h>
#include <onnxruntime_c_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

const OrtApi* api = nullptr;

[[noreturn]] void Die(const std::string& what) {
  std::printf("c_api_test: FAILED: %s\n", what.c_str());
  std::exit(1);
}

void Check(OrtStatus* status, const char* what) {
  if (status == nullptr) return;
  std::string message = api->GetErrorMessage(status);
  api->ReleaseStatus(status);
  Die(std::string(what) + ": " + message);
}

std::vector<uint8_t> ReadFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die(std::string("cannot read ") + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

const OrtEpDevice* FindDevice(OrtEnv* env) {
  const OrtEpDevice* const* devices = nullptr;
  size_t count = 0;
  Check(api->GetEpDevices(env, &devices, &count), "GetEpDevices");
  const OrtEpDevice* found = nullptr;
  for (size_t i = 0; i < count; ++i)
    if (std::strcmp(api->EpDevice_EpName(devices[i]), "OctetExecutionProvider") == 0)
      found = devices[i];
  return found;
}

OrtStatus* MakeSession(OrtEnv* env, const OrtEpDevice* device, const char* model, const char* key,
                       const char* value, OrtSession** session) {
  OrtSessionOptions* options = nullptr;
  Check(api->CreateSessionOptions(&options), "CreateSessionOptions");
  Check(api->SetSessionGraphOptimizationLevel(options, ORT_ENABLE_ALL), "level");
  const char* keys[] = {key};
  const char* values[] = {value};
  Check(api->SessionOptionsAppendExecutionProvider_V2(options, env, &device, 1, keys, values, 1),
        "SessionOptionsAppendExecutionProvider_V2");
  OrtStatus* status = api->CreateSession(env, model, options, session);
  api->ReleaseSessionOptions(options);
  return status;
}

std::vector<uint8_t> Run(OrtSession* session, std::vector<uint8_t>& x, int64_t m, int64_t k,
                         int64_t n) {
  OrtMemoryInfo* memory = nullptr;
  Check(api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &memory), "memory info");
  const int64_t x_shape[] = {m, k};
  OrtValue* input = nullptr;
  Check(api->CreateTensorWithDataAsOrtValue(memory, x.data(), x.size(), x_shape, 2,
                                            ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, &input),
        "input tensor");
  const char* input_names[] = {"x"};
  const char* output_names[] = {"y"};
  OrtValue* output = nullptr;
  Check(api->Run(session, nullptr, input_names, &input, 1, output_names, 1, &output), "Run");
  uint8_t* data = nullptr;
  Check(api->GetTensorMutableData(output, reinterpret_cast<void**>(&data)), "output data");
  std::vector<uint8_t> y(data, data + m * n);
  api->ReleaseValue(output);
  api->ReleaseValue(input);
  api->ReleaseMemoryInfo(memory);
  return y;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9) Die("usage: LIBONNXRUNTIME LIBOCTET_EP MODEL X.bin Y.bin M K N");
  void* ort = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!ort) Die(std::string("dlopen: ") + dlerror());
  using GetApiBase = const OrtApiBase* (*)();
  auto get_api_base = reinterpret_cast<GetApiBase>(dlsym(ort, "OrtGetApiBase"));
  if (!get_api_base) Die("no OrtGetApiBase");
  // The headers' API version (23): a newer runtime serves it too.
  api = get_api_base()->GetApi(ORT_API_VERSION);
  if (!api) Die("the runtime does not offer API version " + std::to_string(ORT_API_VERSION));
  const char* library = argv[2];
  const char* model = argv[3];
  std::vector<uint8_t> x = ReadFile(argv[4]);
  const std::vector<uint8_t> expected = ReadFile(argv[5]);
  const int64_t m = std::atoll(argv[6]), k = std::atoll(argv[7]), n = std::atoll(argv[8]);
  if (static_cast<int64_t>(x.size()) != m * k || static_cast<int64_t>(expected.size()) != m * n)
    Die("input sizes do not match M, K, N");

  OrtEnv* env = nullptr;
  Check(api->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "c_api_test", &env), "CreateEnv");
  for (int round = 0; round < 2; ++round) {
    Check(api->RegisterExecutionProviderLibrary(env, "octet_ep", library),
          "RegisterExecutionProviderLibrary");
    const OrtEpDevice* device = FindDevice(env);
    if (!device) Die("no OctetExecutionProvider device after registering");
    OrtSession* sessions[2] = {nullptr, nullptr};
    for (OrtSession*& s : sessions)
      Check(MakeSession(env, device, model, "threads", "1", &s), "CreateSession");
    for (OrtSession* s : sessions)
      if (Run(s, x, m, k, n) != expected) Die("output differs from the CPU EP's");
    OrtSession* bad = nullptr;
    OrtStatus* status = MakeSession(env, device, model, "debug", "7", &bad);
    if (status == nullptr) Die("a bad option value created a session");
    const std::string message = api->GetErrorMessage(status);
    api->ReleaseStatus(status);
    if (message.find("option debug='7' must be 0 or 1") == std::string::npos)
      Die("unclear error for a bad option: " + message);
    for (OrtSession* s : sessions) api->ReleaseSession(s);
    Check(api->UnregisterExecutionProviderLibrary(env, "octet_ep"),
          "UnregisterExecutionProviderLibrary");
    if (FindDevice(env)) Die("the device is still listed after unregistering");
  }
  api->ReleaseEnv(env);
  std::printf("c_api_test: ok (two rounds of register, 2 sessions, run, bad option, release)\n");
  return 0;
}
