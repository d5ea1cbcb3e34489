// Weights are mmap'd, not copied: opening a ~1 GiB model without repacking
// barely moves the resident set, while --no-mmap reads it all in. Repacking
// (the default) makes one resident copy of the matrices and gives the file's
// pages back, so the resident set grows by about the file size, never twice.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/runner.h"
#include "model/make_model.h"
#include "support/test_support.h"
#include "util/memory_stats.h"

namespace pagellm {
namespace {

TEST(Mmap, ResidentSetFollowsTheLoadMode) {
  test::TempPath path(".gguf");
  MakeModelSpec spec;
  spec.n_embd = 2048;
  spec.n_layer = 22;
  spec.n_head = 32;
  spec.n_head_kv = 8;
  spec.n_ff = 5632;
  spec.type = DType::Q8_0;
  spec.vocab_from = test::data_path("stories260K.gguf");
  {
    ThreadPool pool(ThreadPool::physical_cores());
    make_model(spec, path.path, pool);
  }
  const double file_size = static_cast<double>(std::filesystem::file_size(path.path));
  ASSERT_GT(file_size, 0.9 * (1u << 30));

  const double before = static_cast<double>(current_rss_bytes());
  {
    auto m = ModelRunner::load(path.path, {.use_mmap = true, .repack = false});
    EXPECT_EQ(m->hparams().n_layer, 22);
    const double delta = static_cast<double>(current_rss_bytes()) - before;
    std::printf("mmap: file %.0f MiB, RSS +%.1f MiB\n", file_size / (1 << 20), delta / (1 << 20));
    EXPECT_LT(delta, 0.10 * file_size);
  }
  const double before2 = static_cast<double>(current_rss_bytes());
  {
    auto m = ModelRunner::load(path.path, {.use_mmap = false, .repack = false});
    const double delta = static_cast<double>(current_rss_bytes()) - before2;
    std::printf("no-mmap: file %.0f MiB, RSS +%.1f MiB\n", file_size / (1 << 20),
                delta / (1 << 20));
    EXPECT_GT(delta, 0.95 * file_size);
    EXPECT_LT(delta, 1.10 * file_size);
  }
  for (bool use_mmap : {true, false}) {
    const double before3 = static_cast<double>(current_rss_bytes());
    auto m = ModelRunner::load(path.path, {.use_mmap = use_mmap});
    EXPECT_EQ(m->weights().layers[0].matrix(MatrixRole::kUp).layout, WeightLayout::Rows16);
    const double delta = static_cast<double>(current_rss_bytes()) - before3;
    std::printf("repacked (%s): file %.0f MiB, RSS +%.1f MiB\n", use_mmap ? "mmap" : "no-mmap",
                file_size / (1 << 20), delta / (1 << 20));
    EXPECT_GT(delta, 0.85 * file_size);
    EXPECT_LT(delta, 1.10 * file_size);
  }
}

}  // namespace
}  // namespace pagellm
