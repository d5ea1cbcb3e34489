// Engine setup when the command runs under an MPI launcher with several
// ranks (mpi/mpi_pipeline.h): the layers are split into contiguous stages,
// one per rank; rank 0's plan decides the KV cache (the same block ids on
// every rank); every rank checks that it runs the same build on the same
// model file and that its stage fits its memory, and rank 0 refuses the job
// naming a rank that does not. Rank 0 returns its EngineSetup (the first
// stage, with the link to the others); the other ranks serve steps and exit.
#pragma once

#include "cli/engine_setup.h"

namespace pagellm::cli {

// Every rank (collectively): measures its host and sends it to rank 0, which
// splits the layers over the nodes (planner/node_split.h) for the largest
// cache every node can hold within its budget; the plan (a device per node,
// Plan::nodes) comes back to every rank. Throws PlanError naming the node
// that binds when not even the minimum fits. Only the host of each node
// takes layers (devices per node are not planned across nodes yet).
EnginePlan plan_pipeline(const ModelOptions& mo, const PlanOptions& po);

EngineSetup load_pipeline_engine(const ModelOptions& mo, const PlanOptions& po, const EnginePlan& ep,
                                 const RunOptions& run);


}  // namespace pagellm::cli
