// Engine setup when the command runs under an MPI launcher with several
// ranks (dist/mpi_pipeline.h): the layers are split into contiguous stages,
// one per rank; rank 0's plan decides the KV cache (the same block ids on
// every rank); every rank checks that it runs the same build on the same
// model file and that its stage fits its memory, and rank 0 refuses the job
// naming a rank that does not. Rank 0 returns its EngineSetup (the first
// stage, with the link to the others); the other ranks serve steps and exit.
#pragma once

#include "cli/engine_setup.h"

namespace pagellm::cli {

EngineSetup load_pipeline_engine(const ModelOptions& mo, const PlanOptions& po, const EnginePlan& ep);

// The stage of `rank` of `ranks` over n_layer layers: an even split.
std::pair<int32_t, int32_t> pipeline_stage(int32_t n_layer, int rank, int ranks);

}  // namespace pagellm::cli
