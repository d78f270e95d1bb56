// Every input kept under tests/fuzz/regressions/<target>/ crashed octet, hung it, escaped
// its errors or made threads disagree once (docs/reliability.md lists them). Each runs here
// through its fuzz target's body (tests/fuzz/targets.h), in every build that runs the unit
// tests, and must now end in an octet::Error or a result.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/targets.h"

namespace octet {
namespace {

namespace fs = std::filesystem;

void ThrowFinding(const std::string& what) { throw fuzz::FuzzFinding(what); }

std::vector<fs::path> KeptInputs(const std::string& target) {
  std::vector<fs::path> files;
  const fs::path dir = fs::path(OCTET_SOURCE_DIR) / "tests" / "fuzz" / "regressions" / target;
  if (fs::is_directory(dir))
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs every kept input of `target` through `body`; returns how many there were.
size_t Replay(const std::string& target, int (*body)(const uint8_t*, size_t)) {
  fuzz::SetFindingHandler(ThrowFinding);
  const std::vector<fs::path> files = KeptInputs(target);
  for (const fs::path& file : files) {
    const std::string bytes = ReadFile(file);
    try {
      body(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const fuzz::FuzzFinding& e) {
      ADD_FAILURE() << target << " input " << file.filename() << ": " << e.what();
    }
  }
  fuzz::SetFindingHandler(nullptr);
  return files.size();
}

TEST(FuzzRegressionTest, LoaderInputs) { EXPECT_GT(Replay("loader", fuzz::FuzzLoader), 0u); }

TEST(FuzzRegressionTest, SessionInputs) { EXPECT_GT(Replay("session", fuzz::FuzzSession), 0u); }

TEST(FuzzRegressionTest, RunInputs) {
  const fs::path models = fs::path(OCTET_SOURCE_DIR) / "build" / "fuzz" / "models";
  if (!fs::is_directory(models))
    GTEST_SKIP() << "no " << models << "; tools/fuzz_seeds.py writes the models (scripts/test.sh "
                 << "runs it before these tests)";
  fuzz::SetRunModelsDir(models.string());
  EXPECT_GT(fuzz::RunModelsFound(), 0u);
  EXPECT_GT(Replay("run", fuzz::FuzzRun), 0u);
}

}  // namespace
}  // namespace octet
