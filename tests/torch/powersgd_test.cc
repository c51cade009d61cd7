// DistributedOptimizer with PowerSGD under mpirun, against the algorithm written out here
// from every rank's own gradients (gathered; a twin model gives each rank's gradient before
// the reducer touches it): plain averages before start_iter and for vectors; from the
// second compressed step on, P = sum of M_r Q, orthogonalized, Q = mean of M_r^T P, M = P Q^T
// with each rank's error fed back; the same bits on every rank; and the state a checkpoint
// keeps (the step count and the warm Qs) restored into a fresh optimizer, as a relaunched
// worker does, with the errors restarted from zero.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "chorus/elastic.h"
#include "chorus/torch.h"
#include "newest_commit.h"

namespace chorus::torch {
namespace {

using ::torch::Tensor;

void orthogonalize(Tensor& m) {
  for (int64_t i = 0; i < m.size(1); ++i) {
    Tensor col = m.narrow(1, i, 1);
    col.div_(col.norm());
    for (int64_t j = i + 1; j < m.size(1); ++j) {
      Tensor other = m.narrow(1, j, 1);
      other.sub_((col * other).sum() * col);
    }
  }
}

::torch::nn::Sequential seeded_model() {
  ::torch::manual_seed(11);  // the same model on every rank
  // 8x6 and 3x8 weights: compressed at rank 1 (14 * 2 < 48, 11 * 2 < 24); biases are vectors.
  return ::torch::nn::Sequential(::torch::nn::Linear(6, 8), ::torch::nn::Tanh(),
                                 ::torch::nn::Linear(8, 3));
}

DistributedOptimizerOptions powersgd_options() {
  DistributedOptimizerOptions o;
  o.powersgd.matrix_approximation_rank = 1;
  o.powersgd.start_iter = 2;
  return o;
}

// One rank's trainer and the reference of the whole set, step by step.
struct Trainer {
  ::torch::nn::Sequential model = seeded_model();
  ::torch::nn::Sequential twin = seeded_model();
  ::torch::optim::SGD sgd{model->parameters(), ::torch::optim::SGDOptions(0.05)};
  std::unique_ptr<DistributedOptimizer> opt;
  std::vector<std::string> names;
  // The reference's state: each rank's error and the shared Q, per compressed parameter.
  std::map<std::string, std::vector<Tensor>> errors;
  std::map<std::string, Tensor> q;

  Trainer() {
    for (const auto& item : model->named_parameters()) names.push_back(item.key());
    opt = std::make_unique<DistributedOptimizer>(sgd, named_parameters(*model), powersgd_options());
  }

  // Every rank's own gradients of one step, gathered: [parameter][rank].
  std::vector<std::vector<Tensor>> own_gradients(const Tensor& x, const Tensor& y, int step) {
    {
      ::torch::NoGradGuard no_grad;
      auto ps = model->parameters(), qs = twin->parameters();
      for (std::size_t i = 0; i < ps.size(); ++i) qs[i].copy_(ps[i]);
    }
    twin->zero_grad();
    ::torch::mse_loss(twin->forward(x), y).backward();
    std::vector<std::vector<Tensor>> out;
    auto qs = twin->parameters();
    for (std::size_t i = 0; i < qs.size(); ++i) {
      Tensor all = allgather(qs[i].grad().unsqueeze(0),
                             "own." + std::to_string(step) + "." + std::to_string(i));
      out.emplace_back();
      for (int r = 0; r < size(); ++r) out.back().push_back(all[r].to(::torch::kFloat64));
    }
    return out;
  }

  // One step: checks the reduced gradients against the reference, then steps.
  void step(int step, bool reference_knows_q) {
    ::torch::manual_seed(1000 * step + rank());
    const Tensor x = ::torch::randn({10, 6}), y = ::torch::randn({10, 3});
    const auto own = own_gradients(x, y, step);
    opt->zero_grad();
    ::torch::mse_loss(model->forward(x), y).backward();
    opt->synchronize();
    auto ps = model->parameters();
    const bool compressing = step >= 2;
    for (std::size_t i = 0; i < ps.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(step) + " parameter " + names[i]);
      const Tensor got = ps[i].grad().to(::torch::kFloat64);
      Tensor mean = ::torch::zeros_like(own[i][0]);
      for (const Tensor& g : own[i]) mean += g;
      mean /= size();
      const std::string name = "grad." + names[i];
      if (!compressing || ps[i].dim() < 2) {
        EXPECT_TRUE(::torch::allclose(got, mean, 1e-5, 1e-7));
        continue;
      }
      const int64_t n = ps[i].size(0);
      std::vector<Tensor> m;
      for (int r = 0; r < size(); ++r) {
        Tensor mr = own[i][r].reshape({n, -1});
        if (errors.count(name)) mr = mr + errors[name][r];
        m.push_back(mr);
      }
      Tensor approx;
      if (reference_knows_q) {
        Tensor qr = q.at(name).clone();
        orthogonalize(qr);
        Tensor p = ::torch::zeros({n, qr.size(1)}, ::torch::kFloat64);
        for (const Tensor& mr : m) p += mr.matmul(qr);
        orthogonalize(p);
        Tensor qn = ::torch::zeros_like(qr);
        for (const Tensor& mr : m) qn += mr.t().matmul(p);
        qn /= size();
        approx = p.matmul(qn.t());
        EXPECT_TRUE(::torch::allclose(got.reshape({n, -1}), approx, 1e-4, 1e-6))
            << "off by " << (got.reshape({n, -1}) - approx).abs().max().item<double>();
      } else {
        approx = got.reshape({n, -1});  // a random Q: only its rank can be checked
        const Tensor s = ::torch::linalg_svdvals(approx);
        EXPECT_LT(s[1].item<double>(), 1e-5 * s[0].item<double>()) << "not of rank 1";
      }
      errors[name].clear();
      for (int r = 0; r < size(); ++r) errors[name].push_back(m[r] - approx);
      Tensor mine = ps[i].grad().reshape({1, -1});
      Tensor all = allgather(mine, "bits." + std::to_string(step) + "." + name);
      for (int r = 0; r < size(); ++r) EXPECT_TRUE(all[r].equal(mine[0])) << "rank " << r;
    }
    for (const auto& [name, qv] : opt->powersgd_state().qs) {
      q[name.substr(0, name.size() - 2)] = qv.to(::torch::kFloat64);
    }
    ::torch::NoGradGuard no_grad;
    opt->step();
  }
};

TEST(PowerSgd, FollowsTheAlgorithmWithErrorFeedbackAndWarmStart) {
  Trainer run;
  for (int step = 0; step < 6; ++step) run.step(step, /*reference_knows_q=*/step >= 3);
  const auto state = run.opt->powersgd_state();
  EXPECT_EQ(state.iteration, 6);
  EXPECT_EQ(state.qs.size(), 2u);  // the two weight matrices
}

TEST(PowerSgd, StateRestoredIntoAFreshOptimizerCarriesQAndRestartsTheErrors) {
  Trainer first;
  for (int step = 0; step < 4; ++step) first.step(step, step >= 3);
  std::ostringstream bytes;
  {
    ::torch::serialize::OutputArchive archive;
    ::torch::serialize::OutputArchive model;
    first.model->save(model);
    archive.write("model", model);
    first.opt->save(archive);
    archive.save_to(bytes);
  }
  Trainer resumed;  // a relaunched worker: a fresh model, optimizer and reducer
  {
    std::istringstream in(bytes.str());
    ::torch::serialize::InputArchive archive;
    archive.load_from(in);
    ::torch::serialize::InputArchive model;
    archive.read("model", model);
    resumed.model->load(model);
    resumed.opt->load(archive);
  }
  const auto state = resumed.opt->powersgd_state();
  EXPECT_EQ(state.iteration, 4);
  ASSERT_EQ(state.qs.size(), 2u);
  for (const auto& [name, qv] : state.qs) {
    resumed.q[name.substr(0, name.size() - 2)] = qv.to(::torch::kFloat64);
  }
  for (int step = 4; step < 6; ++step) resumed.step(step, /*reference_knows_q=*/true);
}

// A job restarted on another number of ranks (tests/torch/restart.sh runs the phases at 3
// ranks, then 2): CHORUS_TEST_RESTART=commit trains four steps (two compressed) and commits
// them through the elastic state; =relaunch resumes that commit through elastic::run, as a
// relaunched worker does: the step count and the Qs are the committed ones, and the next
// steps follow the algorithm from those Qs with every rank's error restarted from zero.
TEST(Restart, ResumesTheStepCountAndTheQs) {
  const char* phase_name = std::getenv("CHORUS_TEST_RESTART");
  if (phase_name == nullptr) GTEST_SKIP() << "run by restart.sh";
  const std::string phase = phase_name;
  Trainer t;
  if (phase == "commit") {
    for (int step = 0; step < 4; ++step) t.step(step, step >= 3);
    elastic::State state;
    state.add("model", *t.model).add("optimizer", *t.opt);
    state.commit();
    return;
  }
  ASSERT_EQ(phase, "relaunch");
  ::torch::serialize::InputArchive archive, optimizer;
  read_newest_commit(archive);
  if (HasFatalFailure()) return;
  archive.read("distributed.optimizer", optimizer);
  elastic::State state;
  state.add("model", *t.model).add("optimizer", *t.opt);
  ASSERT_EQ(elastic::run(state,
                         [&](elastic::State&) {
                           const auto resumed = t.opt->powersgd_state();
                           EXPECT_EQ(resumed.iteration, 4);
                           ASSERT_EQ(resumed.qs.size(), 2u);
                           for (const auto& [name, q] : resumed.qs) {
                             Tensor committed;
                             optimizer.read("powersgd." + name, committed);
                             EXPECT_TRUE(q.equal(committed)) << name;
                             t.q[name.substr(0, name.size() - 2)] = q.to(::torch::kFloat64);
                           }
                           for (int step = 4; step < 6; ++step) t.step(step, true);
                         }),
            0);
}

TEST(PowerSgd, RefusesWhatItCannotHonour) {
  auto model = seeded_model();
  ::torch::optim::SGD sgd(model->parameters(), ::torch::optim::SGDOptions(0.1));
  DistributedOptimizerOptions o = powersgd_options();
  o.op = ReduceOp::kSum;
  try {
    DistributedOptimizer opt(sgd, named_parameters(*model), o);
    FAIL() << "PowerSGD with op sum was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op average"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace chorus::torch
