"""Estimators under data parallelism: gather the global batch, estimate once, keep the local slice.

A group's statistics (mean, std, collapse) and the step's ACR are properties of the *global*
batch. When a trainer spreads a step over ranks, and a group's completions over several ranks,
per-rank estimation gives wrong advantages, a wrong ACR and an AVSPO trigger that differs between
ranks. :func:`estimate_distributed` all-gathers every rank's rewards and group ids (variable
lengths allowed, any backend: gloo, NCCL, ...), runs the estimator on the concatenation in rank
order on every rank, and returns each rank its own rows. The result is bitwise identical to the
single-process call on ``concat(local batches in rank order)``, and the estimator state (AVSPO's
``tau_adapt``) is identical on every rank.

TRL already gathers rewards before it normalises them; :mod:`rlvitals.integrations.trl` uses
that global batch directly. This module is for custom loops.

Group ids must be *global*: the same id on two ranks means the same group (use e.g. the prompt's
index in the global batch, or a hash of the prompt).
"""

from __future__ import annotations

from typing import Any

__all__ = ["all_gather_1d", "comm_device", "estimate_distributed", "local_slice"]


def _dist():
    import torch.distributed as dist

    return dist


def _active(group: Any) -> bool:
    dist = _dist()
    return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


def comm_device(tensor: Any, group: Any) -> Any:
    """Device the backend of ``group`` communicates on for ``tensor``: NCCL needs CUDA
    tensors; gloo takes CPU ones (the TRL callback shares its halt flag on it)."""
    import torch

    backend = str(_dist().get_backend(group)).lower()
    if "nccl" in backend and tensor.device.type != "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return tensor.device


def all_gather_1d(tensors: list[Any], group: Any = None) -> tuple[list[Any], list[int]]:
    """All-gather 1-D tensors of one length per rank (lengths may differ between ranks).

    Args:
        tensors: ``[(n_local,) ...]`` tensors of equal length on this rank; float, int or bool,
            each keeps its dtype exactly (values travel as raw 64-bit words).
        group: process group, default the world.

    Returns:
        ``(gathered, counts)``: for each input, the ``(sum(counts),)`` concatenation over ranks
        in rank order, on the input's device; ``counts[r]`` is rank ``r``'s length.

    Two collectives: one for the lengths, one for the padded payload.
    """
    import torch

    dist = _dist()
    n = int(tensors[0].shape[0])
    for t in tensors:
        if t.ndim != 1 or int(t.shape[0]) != n:
            raise ValueError(f"all_gather_1d needs 1-D tensors of one length, got {tuple(t.shape)}")
    world = dist.get_world_size(group)
    device = comm_device(tensors[0], group)
    count = torch.tensor([n], dtype=torch.int64, device=device)
    counts_t = [torch.zeros_like(count) for _ in range(world)]
    dist.all_gather(counts_t, count, group=group)
    counts = [int(c.item()) for c in counts_t]
    width = max(counts)
    # Pack every tensor into 64-bit words: exact for every dtype up to 64 bits.
    payload = torch.zeros((len(tensors), width), dtype=torch.int64, device=device)
    for i, t in enumerate(tensors):
        payload[i, :n] = _to_words(t.to(device))
    parts = [torch.empty_like(payload) for _ in range(world)]
    dist.all_gather(parts, payload, group=group)
    out = []
    for i, t in enumerate(tensors):
        rows = [p[i, :c] for p, c in zip(parts, counts)]
        out.append(_from_words(torch.cat(rows), t.dtype).to(t.device))
    return out, counts


def _to_words(t: Any) -> Any:
    import torch

    if t.dtype == torch.bool:
        return t.to(torch.int64)
    if t.is_floating_point():
        return t.to(torch.float64).view(torch.int64)  # upcasting a float is exact
    return t.to(torch.int64)


def _from_words(w: Any, dtype: Any) -> Any:
    import torch

    if dtype == torch.bool:
        return w != 0
    if torch.empty(0, dtype=dtype).is_floating_point():
        return w.view(torch.float64).to(dtype)
    return w.to(dtype)


def local_slice(counts: list[int], rank: int) -> slice:
    """Rows of rank ``rank`` in the rank-order concatenation.

    >>> local_slice([3, 5, 2], 1)
    slice(3, 8, None)
    """
    start = sum(counts[:rank])
    return slice(start, start + counts[rank])


def estimate_distributed(
    method: str,
    local_rewards: Any,
    local_group_ids: Any,
    *,
    state: Any = None,
    group: Any = None,
    sync_state: bool = True,
    **config: Any,
) -> tuple[Any, dict[str, float], Any]:
    """:func:`rlvitals.estimate` on the global batch of a data-parallel step; local rows back.

    Args:
        method: a registered estimator name (``grpo``, ``dr_grpo``, ``avspo``, ...).
        local_rewards: ``(n_local,)`` this rank's rewards (torch tensor or numpy array); ranks
            may hold different numbers of rows, and a group may span ranks.
        local_group_ids: ``(n_local,)`` integer group ids, global across ranks.
        state: the estimator state from the previous step (the same on every rank).
        group: process group, default the world.
        sync_state: broadcast rank 0's new state to every rank. The computation is already
            identical on every rank; this guards against non-deterministic device kernels.
        **config: the estimator's config fields.

    Returns:
        ``(local_advantages (n_local,), metrics, state)``: advantages of this rank's rows (same
        kind, device and dtype as ``local_rewards``), metrics of the global batch, the new state.

    Without an initialised process group (or with one rank) this is :func:`rlvitals.estimate`.
    """
    from rlvitals import estimate

    if not _active(group):
        return estimate(method, local_rewards, local_group_ids, state=state, **config)
    import numpy as np
    import torch

    dist = _dist()
    as_numpy = not isinstance(local_rewards, torch.Tensor)
    rewards = torch.as_tensor(np.asarray(local_rewards)) if as_numpy else local_rewards
    ids = local_group_ids
    if not isinstance(ids, torch.Tensor):
        np_ids = np.asarray(ids)
        if np_ids.dtype.kind not in "iub":
            raise ValueError(
                f"group ids must be integers to travel between ranks, got {np_ids.dtype}"
            )
        ids = torch.as_tensor(np_ids)
    if ids.is_floating_point() or ids.is_complex():
        raise ValueError(f"group ids must be integers, got {ids.dtype}")
    ids = ids.to(rewards.device)
    (g_rewards, g_ids), counts = all_gather_1d([rewards, ids], group=group)
    if as_numpy:  # the numpy code path, as the single-process call on numpy input would take
        g_rewards, g_ids = g_rewards.numpy(), g_ids.numpy()
    adv, metrics, new_state = estimate(method, g_rewards, g_ids, state=state, **config)
    if sync_state and new_state is not None:
        box = [new_state if dist.get_rank(group) == 0 else None]
        src = dist.get_global_rank(group, 0) if group is not None else 0
        dist.broadcast_object_list(box, src=src, group=group, device=comm_device(rewards, group))
        new_state = box[0]
    return adv[local_slice(counts, dist.get_rank(group))], metrics, new_state
