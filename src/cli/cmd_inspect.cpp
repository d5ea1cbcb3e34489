// pagellm inspect: print a GGUF file's metadata and tensor table.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "gguf/gguf_reader.h"
#include "util/sizes.h"

namespace pagellm::cli {

namespace {

constexpr size_t kArrayPreview = 8;

nlohmann::json value_to_json(const GgufValue& v, size_t max_elems) {
  switch (v.type()) {
    case GgufType::STRING:
      return v.raw_str();
    case GgufType::BOOL:
      return v.as_bool("");
    case GgufType::FLOAT32:
    case GgufType::FLOAT64:
      return v.as_f64("");
    case GgufType::ARRAY: {
      nlohmann::json arr = nlohmann::json::array();
      const auto& elems = v.raw_array();
      for (size_t i = 0; i < elems.size() && i < max_elems; ++i)
        arr.push_back(value_to_json(elems[i], max_elems));
      if (elems.size() <= max_elems) return arr;
      return {{"type", fmt::format("arr[{}]", gguf_type_name(v.elem_type()))},
              {"count", elems.size()},
              {"head", arr}};
    }
    case GgufType::INT8:
    case GgufType::INT16:
    case GgufType::INT32:
    case GgufType::INT64:
      return v.as_i64("");
    default:
      return v.as_u64("");
  }
}

int run_inspect(const std::string& path, bool json, bool full) {
  auto f = GgufFile::open(path);
  const size_t max_elems = full ? SIZE_MAX : kArrayPreview;
  if (json) {
    nlohmann::json j;
    j["file"] = path;
    j["version"] = f->version();
    j["alignment"] = f->alignment();
    j["data_offset"] = f->data_offset();
    j["file_size"] = f->file_size();
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& kv : f->metadata()) meta[kv.key] = value_to_json(kv.value, max_elems);
    j["metadata"] = meta;
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto& t : f->tensors())
      tensors.push_back({{"name", t.name},
                         {"type", dtype_name(t.type)},
                         {"shape", t.ne},
                         {"offset", t.offset},
                         {"bytes", t.n_bytes}});
    j["tensors"] = tensors;
    std::puts(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  fmt::print("{}: GGUF v{}, {} metadata keys, {} tensors ({}), alignment {}, data at {}\n", path,
             f->version(), f->metadata().size(), f->tensors().size(),
             format_size(f->tensor_data_bytes()), f->alignment(), f->data_offset());
  fmt::print("\nmetadata:\n");
  for (const auto& kv : f->metadata())
    fmt::print("  {:<44} {:<4} {}\n", kv.key, gguf_type_name(kv.value.type()),
               kv.value.to_string(max_elems));
  fmt::print("\ntensors:\n  {:<4} {:<32} {:<6} {:<24} {:>14} {:>12}\n", "#", "name", "type",
             "shape", "offset", "bytes");
  int i = 0;
  for (const auto& t : f->tensors()) {
    std::string shape = "[";
    for (size_t d = 0; d < t.ne.size(); ++d) shape += (d ? ", " : "") + std::to_string(t.ne[d]);
    shape += "]";
    fmt::print("  {:<4} {:<32} {:<6} {:<24} {:>14} {:>12}\n", i++, t.name, dtype_name(t.type),
               shape, t.offset, t.n_bytes);
  }
  return 0;
}

}  // namespace

Runner add_inspect(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto full = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("inspect", "Print a GGUF file's metadata and tensors");
  auto* positional = sub->add_option("file", *path, "GGUF file");
  sub->add_option("-m,--model", *path, "GGUF file (as the other commands take it)")
      ->excludes(positional);
  sub->callback([sub, positional] {
    if (positional->count() == 0 && sub->get_option("--model")->count() == 0)
      throw CLI::RequiredError("a GGUF file (inspect FILE or -m FILE)");
  });
  sub->add_flag("--json", *json, "Print JSON");
  sub->add_flag("--full", *full, "Do not abbreviate long arrays");
  return [=] { return run_inspect(*path, *json, *full); };
}

}  // namespace pagellm::cli
