#pragma once
// The job's world over Gloo (collectives/world.h), for jobs that no MPI launcher started:
// torchrun, srun without an MPI plugin, chorusrun --gloo, or a torch.distributed script
// whose store Chorus is handed. The ranks meet in a store (chorus/rendezvous.h) and connect
// Gloo's TCP transport, one full mesh per context: the world's, and two per group (control
// and data, like the MPI world's two communicators), each under its own prefix of the store.

#include <memory>
#include <string>

#include "chorus/rendezvous.h"
#include "chorus/status.h"
#include "collectives/world.h"

namespace chorus {

struct GlooWorldOptions {
  /// The network interface Gloo binds to (CHORUS_GLOO_IFACE); empty: the address this host
  /// reaches `route_to` by, or the host name's where that is empty too.
  std::string iface;
  std::string route_to;
  /// How long connecting a context may wait for the other ranks.
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(300);
  /// The store's key where a supervisor describes the ranks it saw end (GlooControl's
  /// RollCall::lost_key); empty: none.
  std::string lost_key;
};

/// Connects this rank's world through `rendezvous`. Collective over the job's ranks.
StatusOr<std::unique_ptr<World>> init_gloo_world(std::shared_ptr<Rendezvous> rendezvous,
                                                 const GlooWorldOptions& gloo,
                                                 const WorldOptions& options);

}  // namespace chorus
