"""The torch side of tpgemm: one Team per process group, plans cached per problem, and the checks
that turn torch tensors into the device addresses the C++ core takes.

Team and plan creation are collective (every rank of the group, at the same point, as for any
NCCL object) and allocate: they never happen during CUDA-graph capture. Run a model once
eagerly, or call prepare(), before capturing it.
"""
import os
import threading

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import _C
from ._errors import InvalidArgument, Unsupported

DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}
# The scaled (FP8) ops: their operands' type, and the output types tpgemm writes from it.
FP8_DTYPES = ({torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"} if hasattr(torch, "float8_e4m3fn")
              else {})
OUT_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}


class _TeamEntry:
    def __init__(self, team, group):
        self.team = team
        self.group = group
        self.plans = {}
        self.allreduce = {}


_teams = {}  # group name -> _TeamEntry
_lock = threading.Lock()
# op -> implementation, for every plan made afterwards (set_impl); "auto" unless set.
_forced_impl = {}


def resolve_group(group):
    """A ProcessGroup from a group, a group name (as torch.ops.symm_mem takes it) or None (WORLD)."""
    if group is None:
        if not dist.is_initialized():
            raise InvalidArgument("group=None: torch.distributed is not initialised; call "
                                  "torch.distributed.init_process_group first")
        return dist.group.WORLD
    if isinstance(group, str):
        return c10d._resolve_process_group(group)
    return group


def _capturing():
    """Whether the current CUDA stream is being captured (never, where CUDA is not usable)."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def _no_capture(what):
    if _capturing():
        raise InvalidArgument(f"{what} during CUDA-graph capture: team and plan creation are collective and "
                              "allocate; run the model once eagerly or call tpgemm.prepare(model, tokens) before capturing")


def _make_team(pg, timeout_ms, host_timeout_ms, call_check):
    rank, world = dist.get_rank(pg), dist.get_world_size(pg)
    if not torch.cuda.is_available():
        raise InvalidArgument(f"rank {rank}: no CUDA device is usable (torch.cuda.is_available() is False): a "
                              "tpgemm team needs one GPU per rank; CPU tensors take torch's path without one")
    device = torch.cuda.current_device()
    # Rank 0 of the group makes the NCCL unique id and the group's own backend carries it to the
    # others: no port of tpgemm's own is needed.
    uid = torch.zeros(128, dtype=torch.uint8, device=torch.device("cuda", device))
    if rank == 0:
        uid.copy_(torch.tensor(list(_C.unique_id()), dtype=torch.uint8))
    dist.broadcast(uid, src=dist.get_global_rank(pg, 0), group=pg)
    return _C.Team.from_unique_id(bytes(uid.cpu().tolist()), rank, world, device, timeout_ms=timeout_ms,
                                  host_timeout_ms=host_timeout_ms, call_check=call_check)


def _entry(group):
    if isinstance(group, str):  # the per-call path (the ops take group names): one dict lookup
        e = _teams.get(group)
        if e is not None:
            return e
    pg = resolve_group(group)
    e = _teams.get(pg.group_name)
    if e is None:
        with _lock:
            e = _teams.get(pg.group_name)
            if e is None:
                _no_capture(f"creating the tpgemm team of process group {pg.group_name!r}")
                e = _TeamEntry(_make_team(pg, 0, 0, "default"), pg)
                _teams[pg.group_name] = e
    return e


def team_for_group(group=None, *, timeout_ms=0, host_timeout_ms=0, call_check="default"):
    """The tpgemm Team of a torch process group (default WORLD), made on first use: collective over
    the group. The options apply when this call makes it (0 / "default": the environment's, else
    tpgemm's defaults; see TeamOptions in the README)."""
    pg = resolve_group(group)
    with _lock:
        e = _teams.get(pg.group_name)
        if e is None:
            _no_capture(f"creating the tpgemm team of process group {pg.group_name!r}")
            e = _TeamEntry(_make_team(pg, timeout_ms, host_timeout_ms, call_check), pg)
            _teams[pg.group_name] = e
    return e.team


def team_from_env(**options):
    """A Team from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT), without
    torch.distributed: rank 0 serves the unique id at MASTER_PORT + 1 (TPGEMM_BOOTSTRAP_PORT)."""
    return _C.Team.from_env(**options)


def set_impl(op, impl="auto"):
    """Every plan made from now on for `op` ("ag_gemm", "gemm_rs", "gemm_ar" or "all_reduce") uses
    `impl` (for tests and experiments; "auto" restores the planner's choice)."""
    if op not in ("ag_gemm", "gemm_rs", "gemm_ar", "all_reduce"):
        raise InvalidArgument(f"op={op!r}: expected 'ag_gemm', 'gemm_rs', 'gemm_ar' or 'all_reduce'")
    _forced_impl[op] = _C.impl_name(op, impl)  # (an unknown name raises here, not at the next plan)
    from . import ops  # the calls it worked out name plans of the old impl (NOTE [calls worked out once])
    ops.forget_calls()


def impl_for(op):
    """The implementation plans of `op` are made with: set_impl's, else TPGEMM_IMPL's (the GEMM
    ops; read when a plan is made), else auto."""
    return _forced_impl.get(op, os.environ.get("TPGEMM_IMPL", "auto") if op != "all_reduce" else "auto")


def world_size(group):
    e = _teams.get(group) if isinstance(group, str) else None
    return e.team.world_size if e is not None else dist.get_world_size(resolve_group(group))


# Plans made for a shape's exact token counts before its calls run on shared ranges of M instead.
_EXACT_PLANS_PER_SHAPE = 4


class PlanCall:
    """A plan and the M of the calls it serves here: run() passes that M (Operands::m)."""

    def __init__(self, plan, m):
        self.plan = plan
        self.m = m

    @property
    def impl(self):
        return self.plan.impl

    def run(self, a, b, c, d, a_gathered, stream, a_scale=0, b_scale=0):
        self.plan.run(a, b, c, d, a_gathered, stream, self.m, a_scale, b_scale)


# NOTE [deterministic plans]
# Under torch.use_deterministic_algorithms(True) every plan is made with PlanOptions::deterministic:
# the sums of partial products (gemm_rs, gemm_ar) run in an order fixed by tpgemm's own schedules,
# never in NCCL, so the same inputs give the same bits call after call. Whether torch asks for it is
# part of every cache key here and in ops.py, so switching it mid-run makes (or finds) the other
# plans; a problem only NCCL's sum serves then takes torch's path, whose collectives are NCCL's
# (so are the all_reduce op's where its plan runs NCCL: large messages, counts that are not a
# multiple of 8): the promise holds where tpgemm's own kernels run the op.
def plan(group, op, m, n, k, dtype, b_layout, *, alpha=1.0, shard_dim="m", return_gathered_a=False, out_dtype="",
         scale="tensor", b_dtype="", lda=0):
    """The cached Plan for this problem on the group's team, made (collectively) on first use.

    A shape (everything but M) gets a plan of its own for each of its first few token counts, so a
    model whose M never changes runs plans made and tuned for exactly that M. Beyond those (a
    serving loop, packed sequences), one plan per power of two of M serves every M up to it
    (Operands::m), so their number grows with log M, not with M. `lda`: A's row stride in
    elements, 0 where its rows are packed."""
    e = _entry(group)
    impl = impl_for(op)
    deterministic = torch.are_deterministic_algorithms_enabled()  # NOTE [deterministic plans]
    shape = (op, n, k, dtype, b_layout, alpha, shard_dim, return_gathered_a, impl, out_dtype, scale, b_dtype, lda,
             deterministic)
    p = e.plans.get(shape + (m,))
    if p is not None:
        return PlanCall(p, m)
    exact = e.plans.setdefault(shape + ("exact",), set())
    top = m
    if len(exact) >= _EXACT_PLANS_PER_SHAPE:
        unit = e.team.world_size if op in ("ag_gemm", "gemm_rs") and shard_dim == "m" else 1
        top = _doubling_at_least(unit, m)
        p = e.plans.get(shape + (top,))
    if p is None:
        _no_capture(f"creating the plan for {op} M={top} N={n} K={k} {dtype}")
        p = _C.Plan(e.team, op, top, n, k, dtype=dtype, b_layout=b_layout, alpha=alpha, shard_dim=shard_dim,
                    impl=impl, return_gathered_a=return_gathered_a, out_dtype=out_dtype, scale=scale, b_dtype=b_dtype,
                    lda=lda, deterministic=deterministic)
        e.plans[shape + (top,)] = p
        if top == m:
            exact.add(m)
    if top != m and not _capturing():
        # The implementation for m's range of the plan, made now (collectively, like the plan) if it
        # is not yet, so that a later capture finds it (tpgemm.nn.prepare goes through here too).
        p.prepare(m)
    return PlanCall(p, m)


def _doubling_at_least(unit, n):
    """unit x the least power of two that reaches n: the top of n's range of plans."""
    top = unit
    while top < n:
        top *= 2
    return top


def allreduce_plan(group, count, dtype):
    """The all-reduce plan for a call of `count` elements: one per power of two of the count (at
    least 8), serving every count up to it (the C++ plan runs each call on the algorithm its size
    calls for), so their number grows with log count. The algorithm for `count` is made here,
    outside capture, if it is not yet."""
    e = _entry(group)
    impl = _forced_impl.get("all_reduce", "auto")
    if impl in ("oneshot", "twoshot") and count % 8:
        raise Unsupported(f"all_reduce of {count} elements with impl={impl}: the symmetric kernels take multiples "
                          "of 8 elements")
    top = _doubling_at_least(8, count)
    # Deterministic: the rules' choice by size, the same in every process (timings within noise of
    # each other may pick another algorithm, which sums in another order, in the next run).
    deterministic = torch.are_deterministic_algorithms_enabled()
    key = (top, dtype, impl, deterministic)
    p = e.allreduce.get(key)
    if p is None:
        _no_capture(f"creating the all-reduce plan for up to {top} elements of {dtype}")
        p = _C.AllReducePlan(e.team, top, dtype, impl, tune=not deterministic)
        e.allreduce[key] = p
    if not _capturing():
        p.prepare(count)
    return p


def can_implement(group, op, m, n, k, dtype, b_layout, *, shard_dim="m", return_gathered_a=False, out_dtype="",
                  scale="tensor", b_dtype=""):
    """(code, message) from the C++ core: 'Ok' when this rank accepts the problem."""
    e = _entry(group)
    impl = _forced_impl.get(op, "auto")
    return _C.Plan.can_implement(e.team, op, m, n, k, dtype=dtype, b_layout=b_layout, shard_dim=shard_dim, impl=impl,
                                 return_gathered_a=return_gathered_a, out_dtype=out_dtype, scale=scale,
                                 b_dtype=b_dtype, deterministic=torch.are_deterministic_algorithms_enabled())


def team_device(group):
    return _entry(group).team.device


def check_tensor(t, name, *, dtype=None, device=None, dims=None):
    """Raises InvalidArgument naming `name` unless t is a CUDA tensor on `device` of `dtype`."""
    if not isinstance(t, torch.Tensor):
        raise InvalidArgument(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cuda" or (device is not None and t.device.index != device):
        raise InvalidArgument(f"{name} is on {t.device}: expected cuda:{device} (the team's GPU)")
    if dtype is not None and t.dtype != dtype:
        raise InvalidArgument(f"{name} has dtype {t.dtype}: expected {dtype}")
    if dims is not None and t.dim() not in dims:
        raise InvalidArgument(f"{name} has shape {tuple(t.shape)}: expected {' or '.join(map(str, dims))} dimensions")


def address(t, name):
    """The tensor's device address, 16-byte aligned as tpgemm's kernels need (contiguity is the
    caller's check)."""
    p = t.data_ptr()
    if p % 16:
        raise InvalidArgument(f"{name} starts at {p:#x}, which is not 16-byte aligned (a view at an odd offset?): "
                              "expected an aligned tensor; pass a .clone()")
    return p


# The current stream's handle without making a torch.cuda.Stream object (a few us per call);
# torch.cuda.current_stream() where this torch lacks it.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def stream(device=None):
    """The current CUDA stream's handle (of `device`, an index, or the current device)."""
    if _raw_stream is not None and device is not None:
        return _raw_stream(device)
    return torch.cuda.current_stream(device).cuda_stream


# NOTE [one plan, several streams]
# A plan's calls share its buffers and counters, so they must run in order on the GPU (plan.h),
# and torch code may call one op shape from several streams (a side stream for part of a model,
# say). Each plan's last eager stream is kept: a call on another stream first waits for all that
# stream holds so far, which includes the plan's last call (only on a switch: a dictionary lookup
# otherwise). A graph's replays are ordered as its launches are, by the caller: where either
# stream is capturing, nothing is recorded or waited for here. (Plans live as long as the process
# group's team: their ids are never reused.)
_last_stream = {}  # id(C++ plan) -> the stream handle of its last eager call


def call_stream(plan, device):
    """The current stream's handle for a call of `plan` (a PlanCall or an AllReducePlan) on GPU
    `device`, made to wait first for the plan's last call if that ran on another stream."""
    s = stream(device)
    key = id(plan.plan if isinstance(plan, PlanCall) else plan)
    last = _last_stream.get(key)
    if last != s and not _C.stream_capturing(s):
        if last is not None and not _C.stream_capturing(last):
            ev = torch.cuda.Event()
            ev.record(torch.cuda.ExternalStream(last, device=device))
            torch.cuda.ExternalStream(s, device=device).wait_event(ev)
        _last_stream[key] = s
    return s
