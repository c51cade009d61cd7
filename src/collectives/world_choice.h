#pragma once
// Which world carries a job (collectives/world.h): MPI's, when an MPI launcher started it or
// CHORUS_CONTROLLER=mpi says so; Gloo's (collectives/gloo/gloo_world.h), when the job has a
// store to meet in (a program's Rendezvous, or torchrun's variables) and no MPI launcher, or
// CHORUS_CONTROLLER=gloo says so. A process that nothing launched is a job of one rank on MPI.
// An elastic worker of chorusrun --gloo meets the ranks of the round chorusrun assigns it.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/words.h"
#include "chorus/rendezvous.h"
#include "chorus/status.h"
#include "collectives/world.h"
#include "topology/launcher_view.h"

namespace chorus {

enum class Controller : uint8_t { kAuto, kMpi, kGloo };

inline constexpr Words<Controller, 3> kControllerWords{{{
    {Controller::kAuto, "auto"},
    {Controller::kMpi, "mpi"},
    {Controller::kGloo, "gloo"},
}}};

/// What the choice takes from the configuration.
struct WorldChoice {
  Controller controller = Controller::kAuto;  ///< CHORUS_CONTROLLER
  std::shared_ptr<Rendezvous> rendezvous;     ///< Options::rendezvous
  std::string gloo_iface;                     ///< CHORUS_GLOO_IFACE
  int64_t store_port = 0;                     ///< CHORUS_STORE_PORT; 0: MASTER_PORT + 1
  /// CHORUS_ELASTIC_RENDEZVOUS and CHORUS_ELASTIC_WORKER: an elastic worker of chorusrun
  /// --gloo, whose every start joins the job's next round (transport/elastic_round.h).
  std::string elastic_rendezvous;
  std::string elastic_worker;
};

using WorldFactory = std::function<StatusOr<std::unique_ptr<World>>(const WorldOptions&)>;

struct ChosenWorld {
  Controller controller = Controller::kMpi;  ///< mpi or gloo, never auto
  WorldFactory make;                         ///< run later on the runtime's background thread
};

/// The world of this job; an error naming the setting or the variable where the choice cannot
/// be made (Gloo asked of a build without it, torchrun's variables incomplete).
StatusOr<ChosenWorld> choose_world(const WorldChoice& choice, const EnvLookup& env);

/// Whether this build carries a world without MPI.
bool gloo_world_built();

}  // namespace chorus
