// The CPU gated delta rule against a float64 token-by-token recurrence, and
// its bit-level guarantees: every instruction-set variant the same bits, a
// sequence the same bits alone or in any batch and on any thread count, and
// a prompt cut at multiples of the chunk size the same bits as in one call.
#include "backend/cpu/delta_rule.h"

#include <gtest/gtest.h>

#include "backend/cpu/lanes.h"
#include "kernel_test_util.h"
#include "recurrent_test_util.h"
#include "util/error.h"

namespace pagellm {
namespace {

using cpu::CpuIsa;
using test::DeltaInputs;
using test::DeltaShape;
using test::SeqLayout;

// Float32 against float64: each chunk sums in another order than the step, and
// errors carried in the state grow with its memory (slow heads keep ~e^5
// tokens); measured 1e-7 to 8.3e-7 of the largest output (and state) over
// these cases, 1100 tokens included.
constexpr double kTolerance = 5e-6;

struct SeqResult {
  std::vector<float> out, state;
};

// Rows [r0, r0 + n) of `in` as one call for one sequence at position pos.
void run_call(const DeltaInputs& in, int64_t r0, int64_t n, int32_t pos, std::vector<float>& state,
              std::vector<float>& out, ThreadPool& pool, CpuIsa isa) {
  DeltaInputs part = in.slice(r0, n);
  std::vector<float> o(static_cast<size_t>(n * in.shape.n_v_heads * in.shape.d_v));
  SeqLayout lay;
  lay.add(static_cast<int32_t>(n), 0, pos);
  gated_delta_rule(part.args(state.data(), o.data()), lay.batch(), pool, isa);
  std::copy(o.begin(), o.end(), out.begin() + r0 * in.shape.n_v_heads * in.shape.d_v);
}

// The whole of `in` as one sequence from a zero state, in calls of the given
// sizes (the rest in one last call).
SeqResult run_split(const DeltaInputs& in, const std::vector<int64_t>& sizes, ThreadPool& pool,
                    CpuIsa isa = cpu::best_isa()) {
  SeqResult r{std::vector<float>(static_cast<size_t>(in.rows * in.shape.n_v_heads * in.shape.d_v)),
              std::vector<float>(static_cast<size_t>(in.shape.state_floats()))};
  int64_t done = 0;
  for (size_t i = 0; done < in.rows; ++i) {
    const int64_t n = i < sizes.size() ? std::min(sizes[i], in.rows - done) : in.rows - done;
    run_call(in, done, n, static_cast<int32_t>(done), r.state, r.out, pool, isa);
    done += n;
  }
  return r;
}

void expect_matches_reference(const DeltaInputs& in, const SeqResult& got, const char* what) {
  std::vector<double> state(static_cast<size_t>(in.shape.state_floats())), out;
  test::reference_delta_rule(in, 0, in.rows, state, out);
  EXPECT_LT(test::rel_diff(got.out.data(), out.data(), out.size()), kTolerance)
      << what << ", " << in.rows << " tokens";
  EXPECT_LT(test::rel_diff(got.state.data(), state.data(), state.size()), kTolerance)
      << what << " state, " << in.rows << " tokens";
}

TEST(GatedDeltaRule, OneCallMatchesFloat64RecurrenceAtEveryLength) {
  ThreadPool pool(2);
  const DeltaShape shape;  // the golden qwen35: 2 k-heads, 4 v-heads of 32
  for (int64_t n : {1, 2, 3, 63, 64, 65, 130, 1100}) {
    const DeltaInputs in = test::random_delta_inputs(shape, n, 100 + n);
    expect_matches_reference(in, run_split(in, {}, pool), "one call");
  }
}

TEST(GatedDeltaRule, OddSizesAndQwen35HeadShapes) {
  ThreadPool pool(2);
  for (DeltaShape shape : {DeltaShape{1, 3, 24, 40}, DeltaShape{2, 2, 17, 9},
                           DeltaShape{2, 4, 128, 128}}) {
    for (int64_t n : {1, 5, 64, 150}) {
      const DeltaInputs in = test::random_delta_inputs(shape, n, 7 * n + shape.d_v);
      expect_matches_reference(in, run_split(in, {}, pool), "odd shape");
    }
  }
}

// Prefill, then decode token by token from the carried state: the same
// recurrence as the whole run in float64.
TEST(GatedDeltaRule, PrefillThenDecodeContinuesTheState) {
  ThreadPool pool(2);
  const DeltaShape shape{2, 4, 64, 64};
  const DeltaInputs in = test::random_delta_inputs(shape, 300 + 20, 11);
  std::vector<int64_t> calls = {300};
  calls.resize(21, 1);
  expect_matches_reference(in, run_split(in, calls, pool), "prefill + 20 decode steps");
}

TEST(GatedDeltaRule, EveryIsaGivesTheSameBits) {
  ThreadPool pool(2);
  for (DeltaShape shape : {DeltaShape{}, DeltaShape{1, 2, 24, 40}}) {
    const DeltaInputs in = test::random_delta_inputs(shape, 200, 5);
    const std::vector<int64_t> calls = {1, 70, 64, 1, 1, 30};  // steps and chunks
    const SeqResult scalar = run_split(in, calls, pool, CpuIsa::Scalar);
    for (CpuIsa isa : cpu::available_isas()) {
      const SeqResult r = run_split(in, calls, pool, isa);
      EXPECT_EQ(r.out, scalar.out) << cpu::isa_name(isa);
      EXPECT_EQ(r.state, scalar.state) << cpu::isa_name(isa);
    }
  }
}

// Cuts at multiples of the chunk size (and decode steps after) give the bits
// of one call; other cuts reassociate the chunk sums (within the tolerance).
TEST(GatedDeltaRule, CutsAtChunkMultiplesAreExact) {
  ThreadPool pool(2);
  const DeltaInputs in = test::random_delta_inputs(DeltaShape{}, 333, 21);
  const SeqResult whole = run_split(in, {}, pool);
  const int64_t C = kGatedDeltaChunk;
  for (const std::vector<int64_t>& cuts :
       {std::vector<int64_t>{C, 2 * C, C}, std::vector<int64_t>{3 * C}, std::vector<int64_t>{C}}) {
    const SeqResult r = run_split(in, cuts, pool);
    EXPECT_EQ(r.out, whole.out);
    EXPECT_EQ(r.state, whole.state);
  }
  const SeqResult odd = run_split(in, {50, 100, 7}, pool);
  EXPECT_NE(odd.out, whole.out);  // a cut inside a chunk does reassociate
  expect_matches_reference(in, odd, "cut inside chunks");
}

// One sequence alone, then among others (other lengths, positions, slots, order)
// and on another thread count: its outputs and state are the same bits.
TEST(GatedDeltaRule, BatchAndThreadInvariant) {
  const DeltaShape shape{2, 4, 32, 48};
  const int64_t sf = shape.state_floats(), of = shape.n_v_heads * shape.d_v;
  // Three sequences: (rows, first position); each starts from its own state.
  const std::vector<std::pair<int32_t, int32_t>> seqs = {{90, 37}, {1, 500}, {130, 0}};
  std::vector<DeltaInputs> ins;
  std::vector<std::vector<float>> starts;
  for (size_t s = 0; s < seqs.size(); ++s) {
    ins.push_back(test::random_delta_inputs(shape, seqs[s].first, 40 + s));
    ins.back().dt_bias = ins[0].dt_bias;  // one layer's heads
    ins.back().a = ins[0].a;
    starts.push_back(test::random_floats(static_cast<size_t>(sf), 50 + s, 0.3f));
  }
  ThreadPool one(1), two(2);
  std::vector<SeqResult> alone;
  for (size_t s = 0; s < seqs.size(); ++s) {
    SeqResult r{std::vector<float>(static_cast<size_t>(seqs[s].first * of)), starts[s]};
    SeqLayout lay;
    lay.add(seqs[s].first, 0, seqs[s].second);
    gated_delta_rule(ins[s].args(r.state.data(), r.out.data()), lay.batch(), one);
    alone.push_back(r);
  }
  // Batched in reverse order, states in slots 2, 0, 1 of a pool of 3.
  DeltaInputs all{shape, {}, {}, {}, ins[0].dt_bias, ins[0].a, 0};
  SeqLayout lay;
  std::vector<float> states(static_cast<size_t>(3 * sf));
  const int32_t slot_of[] = {1, 0, 2};
  for (int s = 2; s >= 0; --s) {
    all.qkv.insert(all.qkv.end(), ins[s].qkv.begin(), ins[s].qkv.end());
    all.alpha.insert(all.alpha.end(), ins[s].alpha.begin(), ins[s].alpha.end());
    all.b.insert(all.b.end(), ins[s].b.begin(), ins[s].b.end());
    all.rows += seqs[s].first;
    lay.add(seqs[s].first, slot_of[s], seqs[s].second);
    std::copy(starts[s].begin(), starts[s].end(), states.begin() + slot_of[s] * sf);
  }
  std::vector<float> out(static_cast<size_t>(all.rows * of));
  gated_delta_rule(all.args(states.data(), out.data()), lay.batch(), two);
  int64_t row = 0;
  for (int s = 2; s >= 0; --s) {
    const std::vector<float> o(out.begin() + row * of, out.begin() + (row + seqs[s].first) * of);
    const std::vector<float> st(states.begin() + slot_of[s] * sf,
                                states.begin() + (slot_of[s] + 1) * sf);
    EXPECT_EQ(o, alone[s].out) << "sequence " << s;
    EXPECT_EQ(st, alone[s].state) << "sequence " << s;
    row += seqs[s].first;
  }
}

TEST(GatedDeltaRule, RejectsInconsistentArguments) {
  ThreadPool pool(1);
  DeltaInputs in = test::random_delta_inputs(DeltaShape{}, 4, 1);
  std::vector<float> state(static_cast<size_t>(in.shape.state_floats())), out(4 * 128);
  SeqLayout lay;
  lay.add(4, 0, 0);
  GatedDeltaArgs a = in.args(state.data(), out.data());
  a.n_v_heads = 3;  // not a multiple of 2 k-heads
  EXPECT_THROW(gated_delta_rule(a, lay.batch(), pool), Error);
  a = in.args(state.data(), out.data());
  a.state_stride = 10;
  EXPECT_THROW(gated_delta_rule(a, lay.batch(), pool), Error);
  lay.first_pos[0] = -1;
  EXPECT_THROW(gated_delta_rule(in.args(state.data(), out.data()), lay.batch(), pool), Error);
}

// The lanes' exp is close to exp (the vector widths' bits: EveryIsaGivesTheSameBits
// and the conv's SiLU test).
TEST(GatedDeltaRule, LaneExpIsOneFunction) {
  std::vector<float> x = test::random_floats(4096, 3, 30.0f);
  x.insert(x.end(), {0.0f, -0.0f, -87.2f, -87.4f, -200.0f, 88.0f, 1e-8f});
  for (float v : x) {
    const double want = v < -87.3f ? 0.0 : std::exp(static_cast<double>(std::min(v, 88.0f)));
    ASSERT_NEAR(cpu::lanes::exp_scalar(v), want, 4e-7 * want + 1e-38) << v;
  }
}

}  // namespace
}  // namespace pagellm
