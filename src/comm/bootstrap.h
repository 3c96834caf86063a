// Starting a team from a launcher's environment: which rank am I, and how rank 0's
// ncclUniqueId reaches every other rank (a small TCP exchange). No CUDA here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tpgemm/error.h"

namespace tpgemm::comm {

struct LaunchEnv {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int port = 0;  // where rank 0 listens for the unique-id exchange (0 when world == 1)
  std::string source;  // which variables these came from, for messages
};

// Reads RANK / WORLD_SIZE / LOCAL_RANK (torchrun), else OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK}
// (Open MPI), else SLURM_{PROCID,NTASKS,LOCALID}, else PMI_{RANK,SIZE}. The exchange port is
// TPGEMM_BOOTSTRAP_PORT, else MASTER_PORT + 1 (torchrun's agent holds MASTER_PORT itself).
// nullopt when no launcher variables are set; Error(InvalidArgument) naming the variable when
// they are inconsistent.
std::optional<LaunchEnv> read_launch_env();

// Rank 0 sends `payload` to every other rank; every rank returns it. Rank 0 listens on
// env.port, the others connect to env.master_addr : env.port, retrying until `timeout_ms`.
// Each rank brings its own verdict (`mine`: its local checks) and says its rank and world size;
// rank 0 answers once all have arrived (NOTE [unique-id exchange] in bootstrap.cpp): the payload
// to every rank, or, if a rank failed, its world size or rank is off or two claim one rank, an
// error to every rank (the failed rank its own, the others PeerFailure naming it). Error(Timeout)
// names who was waiting for whom.
std::vector<uint8_t> tcp_broadcast(const LaunchEnv& env, const std::vector<uint8_t>& payload, size_t payload_size,
                                   int64_t timeout_ms, const Status& mine = Status::Ok());

}  // namespace tpgemm::comm
