// The opt-in step profile (util/step_profile.h): counts decode steps only,
// and its phases fit inside the steps they split.
#include "util/step_profile.h"

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_runner.h"
#include "grammar/grammar.h"

namespace pagellm {
namespace {

using namespace test;

TEST(StepProfile, SplitsDecodeStepsIntoPhasesThatFitThem) {
  enable_step_profile();
  Loaded m = load("stories260K.gguf");
  for (const bool constrained : {false, true}) {
    SCOPED_TRACE(constrained ? "grammar" : "free");
    ThreadPool pool(2);
    EngineConfig cfg;
    cfg.num_blocks = 64;
    Engine engine(*m.model, *m.tok, pool, cfg);
    const auto prompts = make_prompts(*m.tok, 4);
    const int max_tokens = 12;
    for (const auto& p : prompts) {
      Request r;
      r.prompt = p;
      r.max_tokens = max_tokens;
      r.ignore_eos = true;
      if (constrained) r.grammar = Grammar::parse("root ::= [a-z ]+");
      engine.submit(r, [](const SeqEvent&) {});
    }
    // Decode steps counted independently: those whose every scheduled
    // sequence had its prompt computed before the step.
    uint64_t steps = 0;
    while (engine.has_work()) engine.step(), ++steps;
    const StepProfileTotals& p = engine.step_profile();
    EXPECT_GT(p.steps, 0u);
    EXPECT_LT(p.steps, steps);  // the prompts' steps are not decode steps
    // Each sequence decodes max_tokens - 1 tokens after the one its prompt gives.
    EXPECT_EQ(p.sequences, prompts.size() * (max_tokens - 1));
    int64_t named = 0;
    for (StepPhase ph : {StepPhase::kSchedule, StepPhase::kInputs, StepPhase::kForward,
                         StepPhase::kMaskWait, StepPhase::kSample, StepPhase::kOutput}) {
      EXPECT_GE(p[ph], 0) << step_phase_name(ph);
      named += p[ph];
    }
    EXPECT_LE(named, p.total_ns);
    EXPECT_GT(p[StepPhase::kMatmul], 0);
    EXPECT_LE(p[StepPhase::kMatmul] + p[StepPhase::kAttention], p[StepPhase::kForward]);
    EXPECT_EQ(p[StepPhase::kGrammarCpu] > 0, constrained);
    EXPECT_NE(p.table().find("matmuls"), std::string::npos);
  }
  enable_step_profile(false);  // the other tests' engines need not time themselves
}

}  // namespace
}  // namespace pagellm
