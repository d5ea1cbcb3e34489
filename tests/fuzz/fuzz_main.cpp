// One libFuzzer binary per entry point: PAGELLM_FUZZ_ENTRY names it.
#include "entries/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return pagellm::fuzz::PAGELLM_FUZZ_ENTRY(data, size);
}
