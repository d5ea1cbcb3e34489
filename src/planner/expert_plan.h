// Mixture-of-experts planning (planner.h describes the rules): attention and
// KV placed first with every expert on the host, then the experts taken back
// onto their layers' devices as far as the cache floor allows. Internal to
// the planner.
#pragma once

#include <vector>

#include "planner/planner.h"

namespace pagellm::planner_detail {

// The layer search of planner.cpp (every layer's weights with the layer).
Plan make_layer_plan(const PlanRequest& req, const ModelFootprint& fp,
                     const std::vector<PlanDevice>& devices);

// The plan of a model with experts (fp.has_experts()).
Plan make_expert_plan(const PlanRequest& req, const ModelFootprint& fp,
                      const std::vector<PlanDevice>& devices);

// fp with the experts of the marked layers counted on the host (and the
// host's buffers for them), for the cost model.
ModelFootprint with_experts_on_host(const ModelFootprint& fp, const std::vector<bool>& on_host);

// Fills the devices' expert_bytes and read_bytes_per_token and the plan's
// experts_on_host (only layers whose device is not the host) from the
// model's own footprint.
void annotate_weights(Plan& p, const ModelFootprint& fp, const std::vector<bool>& on_host);

// The smallest cache the request accepts, in blocks (--min-kv-tokens, else
// one sequence of max_seq_len; capped as the planner caps the cache).
int64_t floor_blocks(const PlanRequest& req, const std::vector<PlanDevice>& devices);

}  // namespace pagellm::planner_detail
