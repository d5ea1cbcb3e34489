// The Responses API's memory: the most recent stored responses (body and
// conversation), so that `previous_response_id` can continue one and
// GET/DELETE /v1/responses/{id} can find it. Bounded: beyond `capacity` the
// least recently used one is forgotten. Thread-safe.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

namespace pagellm {

struct StoredResponse {
  nlohmann::ordered_json response;  // the response object as returned
  // The whole conversation as Chat Completions messages (without the
  // instructions, which a continuation does not inherit), reply included.
  nlohmann::ordered_json messages;
};

class ResponseStore {
 public:
  explicit ResponseStore(size_t capacity = 256) : capacity_(capacity) {}

  void put(const std::string& id, StoredResponse r);
  // Marks the entry used.
  std::optional<StoredResponse> get(const std::string& id);
  bool remove(const std::string& id);
  size_t size() const;

 private:
  using Entry = std::pair<std::string, StoredResponse>;
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace pagellm
