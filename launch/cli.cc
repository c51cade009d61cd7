#include "cli.h"

#include "parse_util.h"

namespace chorus::launch {

const char* usage() {
  return R"(usage: chorusrun [options] PROGRAM [ARGS...]

Starts PROGRAM on every rank through mpirun or srun, with the layout spelled out.
Hosts come from -H or --hostfile, else from the allocation this runs in (Slurm,
SGE/ABCI PE_HOSTFILE, PBS_NODEFILE), else this host.

  -np N, -n N             ranks in all (default: --ppr K on every host, else every slot)
  -H, --hosts LIST        hosts and slots: a:4,b:4 (a bare name has one slot)
  --hostfile FILE         lines "name slots=N", "name:N" or "name"
  --ppr K                 K ranks on each host, like mpirun -map-by ppr:K:node
  --launcher NAME         mpirun, srun or auto (srun inside a Slurm job, else mpirun)
  --mpi-args "ARGS"       extra launcher arguments, e.g. "-mca pml ob1" (repeatable;
                          quotes group words, nothing is expanded)
  --bind MODE             CHORUS_BIND for the ranks: none, core or numa; the launcher's
                          own binding is then turned off
  --oversubscribe         allow more ranks than slots
  --gloo                  start the ranks without MPI, as torchrun does: chorusrun runs
                          them (other hosts through ssh, or CHORUS_RSH) with RANK,
                          WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, and
                          they meet over Gloo (CHORUS_CONTROLLER=gloo)
  --explain               print host -> rank -> local_rank -> CPUs before running
  --dry-run               print the command instead of running it
  --check-build           what this build has (MPI, CUDA, NCCL, LibTorch, Python) and
                          whether its libraries load here, then exit
  --check-job             instead of a program, start the ranks of this layout and report
                          host -> rank -> CPUs, NUMA nodes, GPU; the MPI and NCCL versions;
                          and a 1 MiB allreduce's time on each path the job will use
  --max-restarts N        supervise the job: relaunch it after a failure, up to N
                          times, on the hosts left (a host the launcher names as
                          failed is excluded); the training state comes back from the
                          newest commit a node holds (docs/elastic.md). With --gloo the
                          workers reset in place instead: the survivors go on in the
                          same processes, from the newest commit they hold in memory
  --min-np N              end the job when fewer ranks fit (default: -np, else 1)
  --max-np N              never run more ranks than N (hosts added may grow the job)
  --host-discovery-script FILE
                          prints the hosts the job may use now ("name" or "name:slots"
                          lines), run at each launch and every 2 s while the job runs;
                          hosts it adds join at the next commit
  --version               print the version and exit
  -h, --help              this text

The environment reaches the ranks: srun passes it all; mpirun gets -x for each variable
but the shell's and the host's own (PWD, HOSTNAME, TMPDIR...) and the launchers' (OMPI_*,
PMIX_*, SLURM_*...). srun's --mpi is pmix, else pmi2, as `srun --mpi=list` offers, unless
CHORUS_SRUN_MPI says which.
)";
}

StatusOr<Cli> parse_cli(const std::vector<std::string>& args) {
  Cli cli;
  std::size_t i = 0;
  auto value = [&](const std::string& opt, std::string* inline_value) -> StatusOr<std::string> {
    if (inline_value) return *inline_value;
    if (i + 1 >= args.size()) return invalid_argument(opt + " needs a value");
    return args[++i];
  };
  for (; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;
    std::string inline_storage;
    std::string* inline_value = nullptr;
    if (arg.rfind("--", 0) == 0) {
      if (auto eq = arg.find('='); eq != std::string::npos) {
        inline_storage = arg.substr(eq + 1);
        inline_value = &inline_storage;
        arg = arg.substr(0, eq);
      }
    }
    auto take = [&](std::string* out) -> Status {
      StatusOr<std::string> v = value(arg, inline_value);
      if (!v.ok()) return v.status();
      *out = *v;
      return {};
    };
    auto take_int = [&](std::optional<int>* out) -> Status {
      std::string v;
      if (Status s = take(&v); !s.ok()) return s;
      StatusOr<int> n = parse_positive(v, arg);
      if (!n.ok()) return n.status();
      *out = *n;
      return {};
    };
    Status s;
    if (arg == "-np" || arg == "-n" || arg == "--np") {
      s = take_int(&cli.np);
    } else if (arg == "--ppr") {
      s = take_int(&cli.ppr);
    } else if (arg == "-H" || arg == "--hosts" || arg == "--host") {
      s = take(&cli.host_list);
    } else if (arg == "--hostfile") {
      s = take(&cli.hostfile);
    } else if (arg == "--launcher") {
      s = take(&cli.launcher);
      if (s.ok() && cli.launcher != "mpirun" && cli.launcher != "srun" && cli.launcher != "auto") {
        s = invalid_argument("--launcher '" + cli.launcher + "': expected mpirun, srun or auto");
      }
    } else if (arg == "--mpi-args") {
      std::string words;
      s = take(&words);
      if (s.ok()) {
        StatusOr<std::vector<std::string>> split = split_arguments(words, "--mpi-args");
        if (!split.ok()) return split.status();
        cli.launcher_args.insert(cli.launcher_args.end(), split->begin(), split->end());
      }
    } else if (arg == "--max-restarts") {
      std::string v;
      s = take(&v);
      if (s.ok()) {
        StatusOr<int> n = v == "0" ? StatusOr<int>(0) : parse_positive(v, arg);
        if (n.ok()) cli.max_restarts = *n;
        s = n.status();
      }
    } else if (arg == "--min-np") {
      s = take_int(&cli.min_np);
    } else if (arg == "--max-np") {
      s = take_int(&cli.max_np);
    } else if (arg == "--host-discovery-script") {
      s = take(&cli.host_discovery_script);
    } else if (arg == "--bind") {
      s = take(&cli.bind);
    } else if (arg == "--oversubscribe" && !inline_value) {
      cli.oversubscribe = true;
    } else if (arg == "--gloo" && !inline_value) {
      cli.gloo = true;
    } else if (arg == "--dry-run" && !inline_value) {
      cli.dry_run = true;
    } else if (arg == "--explain" && !inline_value) {
      cli.explain = true;
    } else if ((arg == "-h" || arg == "--help") && !inline_value) {
      cli.help = true;
      return cli;
    } else if (arg == "--version" && !inline_value) {
      cli.version = true;
      return cli;
    } else if (arg == "--check-build" && !inline_value) {
      cli.check_build = true;
      return cli;
    } else if (arg == "--check-job" && !inline_value) {
      cli.check_job = true;
    } else {
      s = invalid_argument("unknown option '" + args[i] + "' (chorusrun --help lists them)");
    }
    if (!s.ok()) return s;
  }
  cli.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (cli.check_job && !cli.program.empty()) {
    return invalid_argument("--check-job runs its own program; '" + cli.program[0] +
                            "' was given too");
  }
  if (cli.program.empty() && !cli.check_job) {
    return invalid_argument("no program given (chorusrun --help)");
  }
  if (cli.elastic() && cli.check_job) {
    return invalid_argument("--check-job is not supervised: drop the elastic options");
  }
  if (cli.gloo && (cli.check_job || !cli.launcher_args.empty())) {
    return invalid_argument(
        "--gloo starts the ranks itself: it takes no --mpi-args or --check-job");
  }
  if (cli.min_np && cli.max_np && *cli.min_np > *cli.max_np) {
    return invalid_argument("--min-np " + std::to_string(*cli.min_np) + " is more than --max-np " +
                            std::to_string(*cli.max_np));
  }
  if (!cli.host_list.empty() && !cli.hostfile.empty()) {
    return invalid_argument("give -H or --hostfile, not both");
  }
  return cli;
}

}  // namespace chorus::launch
