#include "collectives/world_choice.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "collectives/mpi/mpi_world.h"
#include "transport/elastic_round.h"
#include "transport/tcp_store.h"
#ifdef CHORUS_WITH_GLOO
#include "collectives/gloo/gloo_world.h"
#endif

namespace chorus {

bool gloo_world_built() {
#ifdef CHORUS_WITH_GLOO
  return true;
#else
  return false;
#endif
}

#ifdef CHORUS_WITH_GLOO
namespace {

// Each start joins the round chorusrun assigns; a round's Gloo connections wait for its ranks
// no longer than the liveness bound, so that a rank lost during a reset fails the reset (and
// the next join follows) instead of holding the others for minutes. A rank whose process
// chorusrun saw end fails the round's waits at once (its "lost" key), not after the bound.
StatusOr<ChosenWorld> elastic_world(const WorldChoice& choice) {
  if (choice.elastic_worker.empty()) {
    return invalid_argument(
        "CHORUS_ELASTIC_RENDEZVOUS is set but CHORUS_ELASTIC_WORKER is not (chorusrun sets both)");
  }
  const ElasticWorker worker{choice.elastic_rendezvous, choice.elastic_worker};
  const std::string iface = choice.gloo_iface;
  return ChosenWorld{
      Controller::kGloo,
      [worker, iface](const WorldOptions& options) -> StatusOr<std::unique_ptr<World>> {
        // Joining waits for the workers chorusrun expects, which may be at their next commit.
        StatusOr<JoinedRound> joined = join_next_round(worker, std::chrono::hours(1));
        if (!joined.ok()) return joined.status();
        GlooWorldOptions gloo;
        gloo.iface = iface;
        gloo.route_to = joined->store_host;
        gloo.lost_key = kLostKey;
        gloo.connect_timeout = std::chrono::milliseconds(
            static_cast<int64_t>(std::max(options.liveness_seconds, 1.0) * 1000));
        return init_gloo_world(std::move(joined->rendezvous), gloo, options);
      }};
}

}  // namespace
#endif

StatusOr<ChosenWorld> choose_world(const WorldChoice& choice, const EnvLookup& env) {
  const bool mpi_launched = started_by_mpi_launcher(env);
  Controller controller = choice.controller;
  StatusOr<std::optional<StoreAddress>> address = torchrun_store(env);
  const bool elastic = !choice.elastic_rendezvous.empty();
  if (controller == Controller::kAuto) {
    const bool store = elastic || choice.rendezvous || !address.ok() || address->has_value();
    controller = !mpi_launched && store ? Controller::kGloo : Controller::kMpi;
  }
  if (controller == Controller::kMpi) return ChosenWorld{controller, init_mpi_world};
#ifndef CHORUS_WITH_GLOO
  return failed_precondition(
      std::string(choice.controller == Controller::kGloo
                      ? "CHORUS_CONTROLLER=gloo"
                      : "no MPI launcher started this job (torchrun's RANK and WORLD_SIZE "
                        "are set)") +
      ", but this build of Chorus has no Gloo (configure found no libgloo-dev): launch it "
      "with mpirun or srun --mpi=pmix, or build Chorus with Gloo");
#else
  if (elastic) return elastic_world(choice);
  if (!address.ok() && !choice.rendezvous) return address.status();
  std::shared_ptr<Rendezvous> given = choice.rendezvous;
  std::optional<StoreAddress> at = address.ok() ? *address : std::nullopt;
  if (!given && !at) {
    return invalid_argument(
        "CHORUS_CONTROLLER=gloo: the job has no store to meet in; set RANK, WORLD_SIZE, "
        "MASTER_ADDR and MASTER_PORT as torchrun does (chorusrun --gloo sets them)");
  }
  const int port = static_cast<int>(choice.store_port > 0 ? choice.store_port
                                    : at                  ? at->port + 1
                                                          : 0);
  if (at && port > 65535) {
    return invalid_argument("MASTER_PORT=" + std::to_string(at->port) +
                            ": the job's store takes the port after it, and there is none; "
                            "set CHORUS_STORE_PORT");
  }
  GlooWorldOptions gloo;
  gloo.iface = choice.gloo_iface;
  // The address this host reaches rank 0's by: torchrun's, or a job script's MASTER_ADDR where
  // torch's store (tcp://) stands for torchrun's variables.
  if (at) {
    gloo.route_to = at->host;
  } else if (std::optional<std::string> master = env("MASTER_ADDR")) {
    gloo.route_to = *master;
  }
  return ChosenWorld{
      controller,
      [given, at, port, gloo](const WorldOptions& options) -> StatusOr<std::unique_ptr<World>> {
        std::shared_ptr<Rendezvous> rendezvous = given;
        if (!rendezvous) {
          StatusOr<std::shared_ptr<TcpRendezvous>> made =
              TcpRendezvous::connect(at->rank, at->size, at->host, port, gloo.connect_timeout);
          if (!made.ok()) return made.status();
          rendezvous = std::move(made).value();
        }
        return init_gloo_world(std::move(rendezvous), gloo, options);
      }};
#endif
}

}  // namespace chorus
