// GGUF reader, model loader, forward pass and vocabulary on arbitrary files.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "entries/fuzz_entries.h"
#include "kvcache/kv_cache_storage.h"
#include "model/runner.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace pagellm::fuzz {

namespace {

// One scratch file per process, removed at exit.
struct Scratch {
  Scratch() {
    const std::filesystem::path dir =
        std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    path = (dir / ("pagellm-fuzz-" + std::to_string(::getpid()) + ".gguf")).string();
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  std::string path;
};

void walk(const GgufFile& f) {
  for (const auto& kv : f.metadata()) {
    (void)kv.value.to_string();
    try {
      (void)f.get_str(kv.key);
    } catch (const Error&) {
    }
    try {
      (void)f.get_i64(kv.key);
    } catch (const Error&) {
    }
    try {
      (void)f.get_f64(kv.key);
    } catch (const Error&) {
    }
  }
  uint64_t sum = 0;
  for (const auto& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) violated("find_tensor does not find a listed tensor");
    if (t.n_bytes == 0 || !t.data) violated("tensor without data");
    // First and last byte: inside the buffer (ASan checks it with --no-mmap).
    sum += t.data[0] + t.data[t.n_bytes - 1];
  }
  if (sum == 0xFFFFFFFFFFFFFFFFull) std::abort();  // keep the reads
}

void run_model(const std::string& path) {
  auto model = ModelRunner::load(path, {.use_mmap = false});
  const auto& hp = model->hparams();
  ThreadPool pool(1);
  KvCacheStorage kv(model->kv_shape(1, 16, DType::F16), {{"host", 0, hp.n_layer}});
  BlockTable table(16);
  table.append_block(0);
  Batch batch;
  const int32_t s = batch.add_sequence(table);
  batch.add_token(s, 0, 0, false);
  batch.add_token(s, hp.n_vocab - 1, 1, true);
  std::vector<float> logits;
  model->forward(batch, kv, pool, logits);
  if (logits.size() != static_cast<size_t>(hp.n_vocab)) violated("logits of the wrong size");
}

void run_tokenizer(const GgufFile& f) {
  auto tok = Tokenizer::from_gguf(f);
  for (bool special : {false, true}) {
    auto ids = tok->encode("Hello world! <s> <|endoftext|> \xe4\xbd\xa0\xe5\xa5\xbd 123 \xff", true,
                           special);
    for (int32_t id : ids)
      if (id < 0 || id >= tok->n_vocab()) violated("encode gave an id outside the vocabulary");
    (void)tok->decode(ids, special);
  }
}

}  // namespace

int gguf(const uint8_t* data, size_t size) {
  static Scratch scratch;
  {
    std::ofstream out(scratch.path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  std::unique_ptr<GgufFile> f;
  try {
    // Read into memory: the sanitizer sees reads past the end of the buffer.
    f = GgufFile::open(scratch.path, {.use_mmap = false});
  } catch (const Error&) {
    return 0;
  }
  walk(*f);
  try {
    run_tokenizer(*f);
  } catch (const Error&) {
  }
  try {
    if (f->get_str("general.architecture")) run_model(scratch.path);
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace pagellm::fuzz
